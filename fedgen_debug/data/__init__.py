"""Federated data layer: every source becomes a TFF `ClientData` in one canonical element format.

Entry points: `parse_data_spec` / `load_client_data` (spec strings), the file contracts in `npz`,
`jsonl` and `tff_sqlite`, the seeded generators in `synthetic_images` / `synthetic_text`, and the
tokenizer and vocabulary in `text`.
"""

from fedgen_debug.data.client_data import ArrayClientData, client_sizes, modality
from fedgen_debug.data.errors import DataError
from fedgen_debug.data.spec import DataSpec, load_client_data, parse_data_spec

__all__ = ["ArrayClientData", "DataError", "DataSpec", "client_sizes", "load_client_data", "modality",
           "parse_data_spec"]
