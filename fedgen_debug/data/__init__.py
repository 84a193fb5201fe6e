"""Federated data layer: every source becomes a TFF `ClientData` in one canonical element format.

Entry points: `parse_data_spec` / `load_client_data` (spec strings), the file contracts in `npz`,
`jsonl` and `tff_sqlite`, the seeded generators in `synthetic_images` / `synthetic_text`, and the
tokenizer and vocabulary in `text`.
"""

import importlib

# Re-exported lazily (PEP 562) so that importing a light submodule, e.g. for `--help`, does not load
# TensorFlow.
_EXPORTS = {
    "ArrayClientData": "client_data", "client_sizes": "client_data", "modality": "client_data",
    "DataError": "errors", "DataSpec": "spec", "load_client_data": "spec", "parse_data_spec": "spec",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
