"""`fedgen_debug.selectors`: selection criteria T1-T6, installed from the card's `selectors/`.

This folder has no `__init__.py` on purpose: a top-level `selectors` package would shadow the stdlib
module that asyncio needs (and break `python -m venv` / `python -m pytest` from the repo root). It is
only importable as `fedgen_debug.selectors` (see setup.cfg); tests check both facts.
"""
