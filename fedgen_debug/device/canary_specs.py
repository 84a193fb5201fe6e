"""Canaries for the LM auxiliaries: formats with holes, the published insertion grids, seeded secrets.

A canary is `prefix | suffix`, every symbol drawn uniformly from an alphabet (Ramaswamy et al. 2020:
"each word in a canary is chosen u.a.r. from the 10K model vocabulary"), so it is out of distribution
and whatever the model learns of it is memorization, not language:
- word-LM: five words of the vocabulary; the first two are the prefix an attacker knows, the last
  three the secret (|R| = K³ fillings of the holes);
- char-LM: one eight-letter word of a–z (the char-LM learns out-of-vocabulary words); two letters of
  prefix, six of secret (|R| = 26⁶).

Two insertion designs (`InsertionConfig`), applied on the devices (`fedgen_debug.device.canaries`):
- `thakkar` (Thakkar et al. 2021): each user becomes a secret sharer of a canary with probability p_u,
  then each of its sentences is replaced by the canary with probability p_e;
- `ramaswamy` (Ramaswamy et al. 2020): n_u synthetic devices, each with n_e copies of the canary and
  200 − n_e public sentences, always available for sampling.
Every config gets `count` canaries; `controls` more are generated the same way and never inserted:
their exposure is what an unseen canary scores (the reference the inserted ones are read against).

The run store keeps the canaries and their configs (`released/canaries.json`); which real users
shared one is drawn from the run secret and never written anywhere.
"""

from __future__ import annotations

import dataclasses
import string

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.spec_grammar import split_spec
from fedgen_debug.validation import check_at_least, check_one_of

THAKKAR, RAMASWAMY = "thakkar", "ramaswamy"
DESIGNS = (THAKKAR, RAMASWAMY)
# Thakkar's p_u ∈ {1/50K, 3/50K, 1/5K} of 392K Stack Overflow users is 8-78 sharers; at simulation
# sizes (hundreds of users) the grid is scaled to keep a few sharers per canary.
THAKKAR_GRID = tuple((p_u, p_e) for p_u in (0.01, 0.03, 0.1) for p_e in (0.01, 0.1, 1.0))
RAMASWAMY_GRID = tuple((n_u, n_e) for n_u in (1, 4, 16) for n_e in (1, 14, 200))
RAMASWAMY_DEVICE_SENTENCES = 200
WORD_PREFIX, WORD_SUFFIX = 2, 3
CHAR_PREFIX, CHAR_SUFFIX = 2, 6
CHAR_ALPHABET = string.ascii_lowercase
CANARIES_HELP = """\
  default                              both published grids (thakkar and ramaswamy), 3 canaries each
  thakkar[:p_u=P,p_e=Q][,count=C]      user-level insertion: the 3x3 grid, or one (p_u, p_e)
  ramaswamy[:n_u=N,n_e=E][,count=C]    synthetic secret-sharing devices: the 3x3 grid, or one (n_u, n_e)
  A+B                                  several of the above"""


@dataclasses.dataclass(frozen=True)
class InsertionConfig:
    design: str
    p_u: float | None = None
    p_e: float | None = None
    n_u: int | None = None
    n_e: int | None = None
    count: int = 3

    def __post_init__(self):
        check_one_of("design", self.design, DESIGNS)
        check_at_least("count", self.count, 1)
        if self.design == THAKKAR:
            for name in ("p_u", "p_e"):
                value = getattr(self, name)
                if value is None or not 0 < value <= 1:
                    raise ValueError(f"{name} must be in (0, 1]. Found {value}.")
            if self.n_u is not None or self.n_e is not None:
                raise ValueError("thakkar insertion takes p_u and p_e, not n_u/n_e.")
        else:
            if self.n_u is None or self.n_u < 1:
                raise ValueError(f"n_u must be >= 1. Found {self.n_u}.")
            if self.n_e is None or not 1 <= self.n_e <= RAMASWAMY_DEVICE_SENTENCES:
                raise ValueError(f"n_e must be in [1, {RAMASWAMY_DEVICE_SENTENCES}]. Found {self.n_e}.")
            if self.p_u is not None or self.p_e is not None:
                raise ValueError("ramaswamy insertion takes n_u and n_e, not p_u/p_e.")

    @property
    def label(self) -> str:
        if self.design == THAKKAR:
            return f"p_u={self.p_u:g},p_e={self.p_e:g}"
        return f"n_u={self.n_u},n_e={self.n_e}"

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def _number(design: str, key: str, value: str, kind):
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{design}: {key} must be a number. Found {value!r}.") from None


def _parse_one(text: str) -> tuple[InsertionConfig, ...]:
    parts = split_spec(text)
    if parts.name == "default":
        if parts.positional or parts.settings:
            raise ValueError("'default' takes no settings.")
        return _parse_one(THAKKAR) + _parse_one(RAMASWAMY)
    if parts.name not in DESIGNS:
        raise ValueError(f"unknown canary design {parts.name!r}. Valid canary specs:\n{CANARIES_HELP}")
    if parts.positional:
        raise ValueError(f"{parts.name}: unexpected {parts.positional[0]!r} (settings are KEY=VALUE).")
    settings = parts.settings_dict()
    keys = ("p_u", "p_e") if parts.name == THAKKAR else ("n_u", "n_e")
    unknown = set(settings) - {*keys, "count"}
    if unknown:
        raise ValueError(f"{parts.name}: unknown setting {sorted(unknown)[0]!r} (settings: {', '.join(keys)}, count).")
    count = _number(parts.name, "count", settings["count"], int) if "count" in settings else 3
    kind = float if parts.name == THAKKAR else int
    given = [k for k in keys if k in settings]
    if len(given) == 1:
        raise ValueError(f"{parts.name}: give both {' and '.join(keys)}, or neither for the published grid.")
    grid = THAKKAR_GRID if parts.name == THAKKAR else RAMASWAMY_GRID
    points = grid if not given else ((_number(parts.name, keys[0], settings[keys[0]], kind),
                                      _number(parts.name, keys[1], settings[keys[1]], kind)),)
    return tuple(InsertionConfig(parts.name, **dict(zip(keys, point)), count=count) for point in points)


def parse_canaries(text: str) -> tuple[InsertionConfig, ...]:
    """The insertion configs a `--canaries` spec names (see `CANARIES_HELP`)."""
    configs = tuple(config for part in text.split("+") for config in _parse_one(part))
    labels = [(c.design, c.label) for c in configs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"a canary config is given twice in {text!r}.")
    return configs


@dataclasses.dataclass(frozen=True)
class Canary:
    """One secret. `config` None: a control canary, generated alike and never inserted."""

    canary_id: str
    prefix: tuple[str, ...]
    suffix: tuple[str, ...]
    config: InsertionConfig | None
    kind: str                        # "word" (symbols are words) or "char" (symbols are letters)

    @property
    def text(self) -> str:
        """What a device's user would have typed: the words with spaces, or the letters as one word."""
        joiner = " " if self.kind == "word" else ""
        return joiner.join(self.prefix + self.suffix)

    def to_json(self) -> dict:
        return {"id": self.canary_id, "kind": self.kind, "prefix": list(self.prefix), "suffix": list(self.suffix),
                "text": self.text, "config": None if self.config is None else self.config.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> "Canary":
        config = None if data["config"] is None else InsertionConfig(**data["config"])
        return cls(data["id"], tuple(data["prefix"]), tuple(data["suffix"]), config, data["kind"])


def space_size(alphabet_size: int, suffix_length: int) -> float:
    """|R|: the fillings of the secret's holes."""
    return float(alphabet_size) ** suffix_length


def generate_canaries(configs, kind: str, alphabet, seed: int, controls: int = 10,
                      forbidden=frozenset()) -> tuple[Canary, ...]:
    """`count` canaries per config and `controls` control canaries, all distinct in prefix and in suffix,
    drawn uniformly from `alphabet` (word-LM: vocabulary words; char-LM: `CHAR_ALPHABET`). `forbidden`:
    texts a canary must not be (a char-LM canary that is a vocabulary word would not be trained on).
    Public randomness (`seed`): the canaries are published with the run; the secret is who got them."""
    check_one_of("kind", kind, ("word", "char"))
    symbols = sorted(set(alphabet))
    prefix_len, suffix_len = (WORD_PREFIX, WORD_SUFFIX) if kind == "word" else (CHAR_PREFIX, CHAR_SUFFIX)
    if len(symbols) < 2:
        raise ValueError(f"a canary alphabet needs at least 2 symbols. Found {len(symbols)}.")
    wanted = sum(c.count for c in configs) + controls
    if wanted > len(symbols) ** prefix_len:  # distinct prefixes, so a prefix names one canary
        raise ValueError(f"{wanted} canaries need more than {len(symbols)}^{prefix_len} distinct prefixes.")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(rng_streams.CANARY_TEXTS,)))
    prefixes, suffixes, canaries = set(), set(), []
    slots = [(c, i) for c in configs for i in range(c.count)] + [(None, i) for i in range(controls)]
    for config, index in slots:
        while True:
            draw = tuple(symbols[i] for i in rng.integers(len(symbols), size=prefix_len + suffix_len))
            prefix, suffix = draw[:prefix_len], draw[prefix_len:]
            text = (" " if kind == "word" else "").join(draw)
            if prefix not in prefixes and suffix not in suffixes and text not in forbidden:
                break
        prefixes.add(prefix)
        suffixes.add(suffix)
        name = f"{config.design}:{config.label}#{index}" if config else f"control#{index}"
        canaries.append(Canary(name, prefix, suffix, config, kind))
    return tuple(canaries)

