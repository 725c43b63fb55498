"""Cached kernel launches shared by the kernel families (ops/flash.py, ops/kvcache.py,
the Gluon kernels through ops/_gluon_common.launch).

Triton's ``JITFunction.run`` binds and specialises every argument again on each call:
tens of microseconds of host time per launch, which decode and small training steps
feel. ``cached_launch`` keeps the compiled kernel that run() picked under a key holding
everything Triton specialises on, and launches it directly the next time:

    the kernel (by id), the device index, the launch options (num_warps, num_stages),
    each tensor argument's dtype and 16-byte alignment (the first ``n_ptr`` arguments),
    every other argument's raw value (which fixes Triton's ``== 1`` / ``% 16`` / i32 /
    i64 classes of ints), except the ``do_not_specialize`` parameters, which count by
    their Python type and i32 / i64 range only, as in Triton (lengths, seeds: they
    change every call without a recompile); on a miss, a second key with every
    specialised argument reduced to its class (``_int_class``).

``cached_launch_kw`` does the same for launches written with keyword constexprs and
options (the Gluon kernels, whose TMA descriptors count by dtype, box and layout).

A family owns its cache dict and its on/off switch; ``run_compiled`` is the tail of
Triton 3.6's run(). scripts/decode_host_overhead.py and scripts/host_overhead.py check
on the CPU (fake driver, stub compiles) that the kernel picked is the one run() picks.
"""

from __future__ import annotations

import threading

import torch
from triton import knobs
from triton.runtime.driver import driver as _driver
from triton.runtime.jit import JITFunction

__all__ = ["cached_launch", "cached_launch_kw", "current_stream", "make_plan", "make_room",
           "plain_launch", "record", "recording", "run_compiled", "run_plan"]

# id(kernel) -> (kernel, positions of its do_not_specialize parameters, positions of its
# other non-constexpr parameters). Keyed by id: a JITFunction hashes through a locked
# property (a microsecond per lookup); the entry holds the kernel itself, so its id is
# never reused while cached keys name it.
_PARAMS: dict = {}
MAX_CACHED = 4096


def make_room(cache: dict, limit: int = MAX_CACHED) -> None:
    """Bound a memo dict the simple way: empty it once it holds more than ``limit``
    entries (a process that keeps making new shapes recompiles nothing, it only rebuilds
    its entries)."""
    if len(cache) > limit:
        cache.clear()


def current_stream(device):
    """The raw current stream of ``device`` as Triton's launchers take it."""
    return _driver.active.get_current_stream(device.index)


def plain_launch(fn, grid, args, num_warps, num_stages):
    """``fn[grid](*args, num_warps=, num_stages=)`` (options left out when None); returns
    what Triton's launch returns (the compiled kernel)."""
    if num_warps is None:
        return fn[grid](*args)
    return fn[grid](*args, num_warps=num_warps, num_stages=num_stages)


def _int_class(x):
    """What Triton 3.6 specialises a non-constexpr argument on: for an int, == 1 (made a
    constant), divisible by 16, and its type (i32 / i64 / u64); a float is fp32 whatever
    its value; anything else (bool, None) by value."""
    if type(x) is int:
        return (x == 1, x % 16 == 0, -2**31 <= x < 2**31, x < 2**63)
    if type(x) is float:
        return float
    return x


def cached_launch(cache: dict, fn, grid, device, n_ptr, args, num_warps, num_stages,
                  run=None):
    """Launch ``fn`` over ``grid`` with ``args`` (every parameter in signature order,
    constexprs included, the ``n_ptr`` tensors first) through ``cache`` (see the module
    docstring). ``run(kernel, grid, stream, args)`` launches a cached kernel (default
    ``run_compiled``; the CPU checks pass a spy). The interpreter's kernels are not
    JITFunctions: they always take Triton's own path.

    Two keys: the raw one (argument values; one tuple and one lookup when a call repeats
    the last shapes), and on a miss the specialisation one (``_int_class`` of each
    specialised argument), which finds the kernel when only values change that Triton
    does not specialise on: strides and lengths of a KV cache growing by a token per
    call, say. A kernel found that way is launched without a raw entry, so the cache
    does not grow with every new length. Returns the compiled kernel it launched (None
    for the interpreter's kernels or an asynchronous compile)."""
    fid = id(fn)
    entry = _PARAMS.get(fid)
    if entry is None:
        if not isinstance(fn, JITFunction):
            plain_launch(fn, grid, args, num_warps, num_stages)
            return None
        entry = _PARAMS[fid] = (
            fn, tuple(i for i, p in enumerate(fn.params) if p.do_not_specialize),
            tuple(i for i, p in enumerate(fn.params)
                  if not p.do_not_specialize and not p.is_constexpr))
    unspecialised = entry[1]
    values = list(args[n_ptr:])
    for i in unspecialised:
        if i >= n_ptr:
            x = args[i]  # (a tensor here, e.g. a seed passed as words: by its dtype)
            values[i - n_ptr] = (type(x), getattr(x, "dtype", None),
                                 type(x) is int and -2**31 <= x < 2**31,
                                 type(x) is int and -2**63 <= x < 2**63)
    ptrs = [(t.dtype, t.data_ptr() & 15) for t in args[:n_ptr]]
    key = (fid, device.index, num_warps, num_stages, *values, *ptrs)
    kernel = cache.get(key)
    if kernel is None:
        for i in entry[2]:
            if i >= n_ptr:
                values[i - n_ptr] = _int_class(args[i])
        class_key = ("class", fid, device.index, num_warps, num_stages, *values, *ptrs)
        kernel = cache.get(class_key)
        if kernel is None:
            kernel = plain_launch(fn, grid, args, num_warps, num_stages)
            if kernel is None or hasattr(kernel, "result"):  # an async compile
                return None
            make_room(cache)
            cache[key] = cache[class_key] = kernel
            return kernel
    (run or run_compiled)(kernel, grid, current_stream(device), args)
    return kernel


# id(kernel) -> (kernel, parameter names, the set of them, defaults, positions of the
# do_not_specialize parameters): cached_launch_kw's view of a kernel's signature
_SIGS: dict = {}


def _signature(fn):
    entry = _SIGS.get(id(fn))
    if entry is None:
        names = tuple(p.name for p in fn.params)
        entry = _SIGS[id(fn)] = (
            fn, names, frozenset(names), tuple(p.default for p in fn.params),
            frozenset(i for i, p in enumerate(fn.params) if p.do_not_specialize))
    return entry


_PLAIN = frozenset((int, float, bool, str, type(None)))


def _arg_key(x):
    """What Triton 3.6 specialises an argument on, as a hashable value: a tensor by dtype
    and 16-byte alignment; a TMA descriptor (Gluon's TensorDescriptor) by its base's
    dtype, box and shared layout (its type, ``tensordesc<bf16[1, 64, 1, 128],
    NVMMASharedLayout(...)>``: shapes and strides are runtime values), the layout by
    identity (``_gluon_common.tma_desc``'s layouts live as long as the process, so an id
    never comes back for another layout); anything else (ints, floats, bools, None,
    strings: constexprs and scalars) by value."""
    if type(x) in _PLAIN:
        return x
    if isinstance(x, torch.Tensor):
        return (x.dtype, x.data_ptr() & 15)
    layout = getattr(x, "layout", None)
    if layout is not None and hasattr(x, "block_shape"):
        return (x.base.dtype, tuple(x.block_shape), id(layout))
    return x


def cached_launch_kw(cache: dict, fn, grid, device, args, kwargs, run=None) -> None:
    """``fn[grid](*args, **kwargs)`` through ``cache``, for launches written with keyword
    constexprs and options (the Gluon kernels): the first call runs Triton's own launch
    and keeps the compiled kernel under a key of the device, the options (keywords that
    are not parameters: num_warps, maxnreg), and every parameter's ``_arg_key`` in
    signature order (defaults filled in; a ``do_not_specialize`` int by its i32 / i64
    range only, as Triton does); later calls with the same key launch it directly
    (``run_compiled``). Values keyed exactly where Triton only classifies them (ints
    by == 1 / % 16) cost a miss, never a wrong kernel."""
    entry = _signature(fn)
    _, names, params, defaults, nospec = entry
    full = list(args)
    for i in range(len(args), len(names)):
        full.append(kwargs.get(names[i], defaults[i]))
    parts = [id(fn), device.index]
    for k, val in kwargs.items():
        if k not in params:
            parts.append((k, val))
    for i, x in enumerate(full):
        if type(x) in _PLAIN:
            parts.append((int, -2**31 <= x < 2**31) if i in nospec and type(x) is int else x)
        else:
            parts.append(_arg_key(x))
    key = tuple(parts)
    kernel = cache.get(key)
    if kernel is None:
        kernel = fn[grid](*args, **kwargs)
        if kernel is not None and not hasattr(kernel, "result"):  # not an async compile
            make_room(cache)
            cache[key] = kernel
        else:
            kernel = None
    else:
        (run or run_compiled)(kernel, grid, current_stream(device), full)
    records = _TLS.records
    if records is not None:
        records.append(("launch", kernel, grid, full))


# Launch plans (ops/flash.py's Gluon forward and backward): while ``recording`` is open,
# cached_launch_kw appends each launch as ("launch", compiled kernel or None, grid, all
# arguments), and the launchers ``record`` what else a plan must replay: ("alloc", tensor,
# zeroed) for a scratch buffer, ("sum", part, view shape, dim, out) for torch.sum(part.
# view(shape), dim, out=out), and ("expect", n) when the call is plannable with n launches.
# ``make_plan`` turns a call's records into steps over the call's own tensors; ``run_plan``
# replays them on new tensors of the same signature: scratch allocated again, descriptors
# rebuilt over the new tensors, everything else as recorded.
# Per thread (threads launching at once, DataParallel's say, record their own calls).


class _Records(threading.local):
    records: list | None = None


_TLS = _Records()


class recording:
    """``with recording() as records:`` what the launchers record inside, in this thread
    (not reentrant: an inner recording ends the outer one's)."""

    def __enter__(self) -> list:
        _TLS.records = []
        return _TLS.records

    def __exit__(self, *exc) -> None:
        _TLS.records = None


def record(*entry) -> None:
    """Append ``entry`` to the open recording, if any (see ``recording``)."""
    records = _TLS.records
    if records is not None:
        records.append(entry)


def make_plan(records: list, sources: tuple):
    """The steps that replay ``records`` over ``sources``, or None unless the launcher
    recorded exactly one ("expect", n), n launches followed, each with its compiled
    kernel, and every tensor a launch or a sum took is one of ``sources`` or a recorded
    scratch buffer (by identity), every TMA descriptor a whole-tensor one over one of them
    (shape and strides the tensor's own, as ``_gluon_common.tma_desc`` builds them, and
    ``stats_desc`` on a 2D tensor), and every other argument a plain value (int, float,
    bool, None, string), replayed as recorded."""
    expect = [e[1] for e in records if e[0] == "expect"]
    if len(expect) != 1:
        return None
    ids = {id(t): i for i, t in enumerate(sources)}
    steps, launches = [], 0
    for entry in records:
        kind = entry[0]
        if kind == "alloc":
            _, t, zero = entry
            ids[id(t)] = len(ids)
            steps.append(("alloc", tuple(t.shape), t.dtype, zero))
        elif kind == "sum":
            _, part, shape, dim, out = entry
            if id(part) not in ids or id(out) not in ids:
                return None
            steps.append(("sum", ids[id(part)], shape, dim, ids[id(out)]))
        elif kind == "launch":
            _, kernel, grid, full = entry
            if kernel is None:
                return None
            launches += 1
            slots = []
            for i, x in enumerate(full):
                if type(x) in _PLAIN:
                    continue
                if isinstance(x, torch.Tensor):
                    if id(x) not in ids:
                        return None
                    slots.append((i, ids[id(x)], None, None))
                    continue
                base = getattr(x, "base", None)
                if (id(base) not in ids or not hasattr(x, "block_shape")
                        or list(x.shape) != list(base.shape)
                        or list(x.strides) != list(base.stride())
                        or getattr(x, "padding", "zero") != "zero"):
                    return None
                slots.append((i, ids[id(base)], list(x.block_shape), x.layout))
            template = list(full)
            for slot in slots:  # (no reference to this call's tensors stays in the plan)
                template[slot[0]] = None
            steps.append(("launch", kernel, grid, tuple(template), tuple(slots)))
        elif kind != "expect":
            return None
    return tuple(steps) if launches == expect[0] else None


def run_plan(plan, sources: tuple, device, run, desc) -> None:
    """Replay ``plan`` (make_plan's steps) over ``sources`` (tensors of the signature the
    plan was made for, in make_plan's order) on ``device``'s current stream: ``run`` is
    run_compiled (or a spy), ``desc(x, block, layout)`` builds a descriptor
    (``_gluon_common._unchecked_desc``)."""
    srcs = list(sources)
    stream = current_stream(device)
    for step in plan:
        kind = step[0]
        if kind == "launch":
            _, kernel, grid, template, slots = step
            args = list(template)
            for i, src, block, layout in slots:
                x = srcs[src]
                args[i] = x if block is None else desc(x, block, layout)
            run(kernel, grid, stream, args)
        elif kind == "alloc":
            _, shape, dtype, zero = step
            srcs.append((torch.zeros if zero else torch.empty)(shape, dtype=dtype,
                                                                device=device))
        else:  # "sum"
            _, part, shape, dim, out = step
            torch.sum(srcs[part].view(shape), dim=dim, out=srcs[out])


def run_compiled(kernel, grid, stream, args):
    """The tail of triton's JITFunction.run (3.6): launch an already-compiled kernel."""
    meta = kernel.launch_metadata(grid, stream, *args)
    kernel.run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1,
               stream, kernel.function, kernel.packed_metadata, meta,
               knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *args)
