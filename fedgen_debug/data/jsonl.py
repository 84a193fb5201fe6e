"""The text `.jsonl` contract: one object per line, `{"client_id": ..., "text": ...}`.

Each line holds one sentence or post. Blank lines are ignored, and so is an empty or null `text` of a
client that wrote something else too; anything else that is not such an object is an error naming the
line.
"""

from __future__ import annotations

import collections
import json

import tensorflow_federated as tff
from fedgen_debug.progress import progress

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.atomic import atomic_path
from fedgen_debug.data.errors import DataError

_MISSING = object()


def read_jsonl(path: str) -> cd.ArrayClientData:
    sentences, first_line = collections.defaultdict(list), {}
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(path, "file not found.") from None
    except OSError as e:
        raise DataError(path, f"cannot be read ({e.strerror}).") from None
    with f:
        for line_no, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")   # -sig: a byte-order mark
            except UnicodeDecodeError as e:
                raise DataError(path, f"line {line_no}: invalid UTF-8 at byte {e.start}.") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(path, f"line {line_no}: not valid JSON ({e.msg}).") from None
            if not isinstance(record, dict):
                raise DataError(path, f"line {line_no}: expected an object with 'client_id' and 'text'.")
            if "client_id" not in record:
                raise DataError(path, f"line {line_no}: missing 'client_id' (found keys: {_keys(record)}).")
            client_id, text = record["client_id"], record.get("text", _MISSING)
            if not isinstance(client_id, (str, int)) or isinstance(client_id, bool) or str(client_id) == "":
                raise DataError(path, f"line {line_no}: 'client_id' must be a non-empty string or integer.")
            if text is _MISSING:
                raise DataError(path, f"line {line_no}: missing 'text' (found keys: {_keys(record)}).")
            if text is not None and not isinstance(text, str):
                raise DataError(path, f"line {line_no}: 'text' must be a string (or null).")
            for name, value in (("client_id", str(client_id)), ("text", text or "")):
                try:   # JSON's \ud800 escapes decode to lone surrogates, which no UTF-8 text holds
                    value.encode("utf-8")
                except UnicodeEncodeError:   # the message shows no character of the user's text
                    raise DataError(path, f"line {line_no}: '{name}' holds a lone surrogate escape (\\ud800-\\udfff), "
                                          "not text: half of an emoji's escape pair?") from None
            # An empty message (an export's "" or null) is no sentence; its sender is still a device.
            sentences[str(client_id)].extend([text] if text and text.strip() else [])
            first_line.setdefault(str(client_id), line_no)
    if not any(sentences.values()):
        raise DataError(path, "contains no examples.")
    silent = [cid for cid, texts in sentences.items() if not texts]
    if silent:
        # Dropping them would make the population's size (released) depend on what the devices wrote.
        others = len(silent) - 1
        raise DataError(path, f"client {silent[0]!r} (line {first_line[silent[0]]}) has only empty texts"
                        + (f", and {others} more client{'s' if others > 1 else ''}" if others else "")
                        + ": every client needs at least one non-empty text.")
    return cd.ArrayClientData({cid: cd.text_examples(s) for cid, s in sentences.items()})


def _keys(record: dict) -> str:
    return ", ".join(repr(k) for k in sorted(record)) or "none"


def write_jsonl(client_data: tff.simulation.datasets.ClientData, path: str) -> int:
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for cid in progress(client_data.client_ids, desc="writing jsonl", unit="client"):
            for text in cd.client_numpy(client_data, cid)["text"]:
                f.write(json.dumps({"client_id": cid, "text": text.decode("utf-8")}, ensure_ascii=False))
                f.write("\n")
                n += 1
    return n
