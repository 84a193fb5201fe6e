"""Data specs: the one string every command uses to name a federated dataset (see `SPEC_HELP`).

Paths may not contain commas. CACHE_DIR defaults to TFF's own (~/.tff).
"""

from __future__ import annotations

import dataclasses

from fedgen_debug.spec_grammar import split_spec

IMAGES = "images"  # == client_data.IMAGES, repeated so that parsing does not import TensorFlow
TEXT = "text"
PUBLIC_PREFIX = "public:"  # before a spec: public stand-in data (a vocabulary, pretraining), charged nothing

_SOURCES = {
    # source: (modality, positional argument, {option: (type, default)})
    "synthetic-images": (IMAGES, None, {"writers": (int, 3400), "seed": (int, 0)}),
    "synthetic-text": (TEXT, None, {"users": (int, 1000), "seed": (int, 0), "rich": (float, 0.0)}),
    "npz": (IMAGES, "PATH", {"background": (str, "white")}),
    "jsonl": (TEXT, "PATH", {}),
    "play": (TEXT, "PATH", {"min_sentences": (int, 1)}),
    "tff-emnist": (IMAGES, "CACHE_DIR", {}),
    "tff-stackoverflow": (TEXT, "CACHE_DIR", {}),
}
FILE_SOURCES = frozenset({"npz", "jsonl", "play"})   # the sources that name a file
SPEC_HELP = """\
  synthetic-images[:writers=N,seed=S]  FEMNIST-like handwriting (default 3,400 writers, as the paper)
  synthetic-text[:users=N,seed=S,rich=R] Stack-Overflow-like sentences (default 1,000 users); R: the share of
                                       words that are numbers, quoted code, "&" or accented words (default 0)
  npz:PATH[,background=black]          images .npz contract (docs/data.md)
  jsonl:PATH                           text .jsonl contract (docs/data.md)
  play:PATH[,min_sentences=N]          a play script (Tiny Shakespeare format): speakers are users
  tff-emnist[:CACHE_DIR]               TFF's Federated EMNIST (62 classes), offline from CACHE_DIR
  tff-stackoverflow[:CACHE_DIR]        TFF's Stack Overflow, offline from CACHE_DIR"""


@dataclasses.dataclass(frozen=True)
class DataSpec:
    source: str
    path: str | None = None
    options: tuple[tuple[str, object], ...] = ()

    @property
    def modality(self) -> str:
        return _SOURCES[self.source][0]

    def option(self, name: str):
        return dict(self.options).get(name, _SOURCES[self.source][2][name][1])

    def __str__(self) -> str:
        parts = ([self.path] if self.path else []) + [f"{k}={v}" for k, v in self.options]
        return self.source + (":" + ",".join(parts) if parts else "")


def _usage() -> str:
    return "valid data specs:\n" + SPEC_HELP


def _did_you_mean(text: str) -> str:
    """A file given without its scheme, or with a wrong one (`before.jsonl`, `json:before.jsonl`): the spec it
    was meant as."""
    path = text.partition(":")[2] or text
    for suffix, scheme in ((".jsonl", "jsonl"), (".npz", "npz")):
        if path.lower().endswith(suffix):
            return f" (a file? say {scheme}:{path})"
    return ""


def parse_data_spec(text: str) -> DataSpec:
    """Parses and validates a data spec; raises ValueError naming the problem and the valid forms."""
    source = text.strip().partition(":")[0]
    if source not in _SOURCES:
        raise ValueError(f"Unknown data source {source!r} in spec {text!r}{_did_you_mean(text.strip())}.\n{_usage()}")
    parts = split_spec(text)
    _, positional, allowed = _SOURCES[source]
    if len(parts.positional) > (1 if positional else 0):
        raise ValueError(f"{source}: unexpected {parts.positional[-1]!r} in spec {text!r} "
                         f"(options: {', '.join(allowed) or 'none'}).\n{_usage()}")
    path = parts.positional[0] if parts.positional else None
    options = {}
    for key, value in parts.settings:
        if key not in allowed:
            raise ValueError(f"{source}: unexpected '{key}={value}' in spec {text!r} "
                             f"(options: {', '.join(allowed) or 'none'}).\n{_usage()}")
        try:
            options[key] = allowed[key][0](value)
        except ValueError:
            kind = "a number" if allowed[key][0] is float else "an integer"
            raise ValueError(f"{source}: option {key} must be {kind}. Found {value!r}.") from None
    if source in FILE_SOURCES and not path:
        raise ValueError(f"{source} needs a path, e.g. {source}:data/file.{source}.")
    for key in ("writers", "users", "min_sentences"):
        if key in options and options[key] < 1:
            raise ValueError(f"{source}: {key} must be >= 1. Found {options[key]}.")
    if not 0.0 <= options.get("rich", 0.0) < 1.0:
        raise ValueError(f"synthetic-text: rich must be in [0, 1). Found {options['rich']}.")
    if options.get("background", "white") not in ("white", "black"):
        raise ValueError(f"npz: background must be white or black. Found {options['background']!r}.")
    return DataSpec(source, path, tuple(sorted(options.items())))


def load_client_data(spec: DataSpec | str):
    """The dataset a spec names, as a TFF `ClientData` in the canonical element format."""
    from fedgen_debug.data import jsonl, npz, plays, synthetic_images, synthetic_text, tff_sqlite

    if isinstance(spec, str):
        spec = parse_data_spec(spec)
    if spec.source == "synthetic-images":
        return synthetic_images.generate(
            synthetic_images.SyntheticImagesConfig(writers=spec.option("writers"), seed=spec.option("seed"))
        )
    if spec.source == "synthetic-text":
        return synthetic_text.generate(
            synthetic_text.SyntheticTextConfig(users=spec.option("users"), seed=spec.option("seed"),
                                               rich=spec.option("rich"))
        )
    if spec.source == "npz":
        return npz.read_npz(spec.path, background=spec.option("background"))
    if spec.source == "jsonl":
        return jsonl.read_jsonl(spec.path)
    if spec.source == "play":
        return plays.read_play(spec.path, spec.option("min_sentences"))
    if spec.source == "tff-emnist":
        return tff_sqlite.load_tff_emnist(spec.path)
    return tff_sqlite.load_tff_stackoverflow(spec.path)


def user_namespace(spec: DataSpec | str) -> str:
    """Where a spec's user ids name people (`privacy.populations`): synthetic users are simulated per
    generator and seed; every file or TFF dataset is the data owner's users, named by their ids in any
    format (a play converted to JSONL, an `.npz` written as TFF sqlite: the same people)."""
    if isinstance(spec, str):
        spec = parse_data_spec(spec)
    if spec.source in ("synthetic-images", "synthetic-text"):
        return f"{spec.source}:seed={spec.option('seed')}"
    return "users"


def client_ids(spec: DataSpec | str) -> tuple[str, ...]:
    """The user ids a spec holds (synthetic ones without generating their data; a file's read once per
    version of the file in a process: a monitor asks each period)."""
    import os

    from fedgen_debug.data import synthetic_images, synthetic_text

    if isinstance(spec, str):
        spec = parse_data_spec(spec)
    if spec.source == "synthetic-images":
        return tuple(map(synthetic_images.writer_id, range(spec.option("writers"))))
    if spec.source == "synthetic-text":
        return tuple(map(synthetic_text.user_id, range(spec.option("users"))))
    path = os.path.expanduser(spec.path or "")
    version = (os.path.abspath(path), os.stat(path).st_mtime_ns, os.stat(path).st_size) if os.path.isfile(path) else None
    key = (spec.source, spec.options, version)
    if version is None or key not in _CLIENT_IDS:
        ids = tuple(load_client_data(spec).client_ids)
        if version is None:
            return ids
        _CLIENT_IDS[key] = ids
    return _CLIENT_IDS[key]


_CLIENT_IDS: dict = {}
