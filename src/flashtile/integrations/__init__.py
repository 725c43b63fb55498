"""Integrations of flashtile with other libraries.

Nothing here is imported by ``import flashtile``, and importing a submodule registers
nothing: each integration has an explicit entry point, e.g.
``flashtile.integrations.hf.register()`` for HuggingFace transformers.
"""
