"""Test setup: the Triton interpreter on machines without CUDA, seeds from test ids.

TRITON_INTERPRET must be set before triton is imported, so this runs first.
"""

import os

import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from flashtile.ops.flash import clear_plans  # noqa: E402
from flashtile.validate import seed_from  # noqa: E402

DEVICE = torch.device("cuda") if HAS_CUDA else torch.device("cpu")


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (run scripts/gpu_check.sh there)")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def seed(request):
    """Every test draws from a generator seeded by its own id; the seed is reported on
    failure (see pytest_runtest_makereport)."""
    value = seed_from(request.node.nodeid)
    torch.manual_seed(value)
    request.node.flashtile_seed = value
    return value


@pytest.fixture(autouse=True)
def fresh_plans():
    """Every test starts without launch plans (ops/flash.py): a plan made by an earlier
    test would replay its launches past the spies and patched configs a test sets up."""
    clear_plans()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and hasattr(item, "flashtile_seed"):
        rep.sections.append(("flashtile seed", f"torch.manual_seed({item.flashtile_seed})"))


@pytest.fixture
def device():
    return DEVICE
