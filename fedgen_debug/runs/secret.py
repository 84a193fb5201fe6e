"""The run secret: the only source of DP noise and client sampling (never the public `--seed`).

Knowing the noise seed is knowing the noise: a modeler who could rebuild it would subtract it from the
released model and read the exact clipped mean; one who could rebuild the sample would defeat
amplification by sampling. So every run draws 256 bits of OS entropy when it starts and keeps them in
`server/secret.json` (owner-readable only). Resume reads them back, so a resumed run draws exactly the
noise and samples an uninterrupted one would. Each use gets its own stream (`STREAMS`), derived with
numpy's `SeedSequence`; streams never overlap and none can be inverted back to the entropy.

`--seed` keeps controlling what is public: synthetic data, model initialisation, the simulated bug
assignment and device-side shuffling.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np

from fedgen_debug.runs import store

# Every secret stream, by name. Adding one: a new number, never reuse or renumber one.
STREAMS = {
    "dp-noise": 1,            # the DP aggregator's Gaussian noise (training)
    "sampling": 2,            # which clients take part in a round
    "gan-client-steps": 3,    # device-side G noise and gradient-penalty draws in DP-FedAvg-GAN
    "gan-server": 4,          # the server's generator-step noise
    "quantile-noise": 5,      # DP quantile (T4 thresholds)
    "quantile-sampling": 6,
    "aggregate-noise": 7,     # DP aggregates of device statistics (keyed by the aggregate's name)
    "vocabulary-noise": 8,    # DP heavy hitters
    "canary-insertion": 9,    # which users share a canary, and which of their sentences it replaces
    "monitor-runs": 10,       # a monitor's period runs: each run's secret derives from the monitor's
    "client-examples": 11,    # which of its examples a device trains on in a round (`client.max_examples`)
    "cross-client-prefixes": 12,  # which of a user's sentences give the cross-client memorization prefixes
}


def _stream(name: str) -> int:
    if name not in STREAMS:
        raise ValueError(f"unknown secret stream {name!r}; streams: {', '.join(STREAMS)}.")
    return STREAMS[name]


def _key(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


@dataclasses.dataclass(frozen=True, repr=False)
class RunSecret:
    entropy: int   # 256 bits

    def __repr__(self) -> str:  # never print the secret
        return f"RunSecret(run_id={self.run_id})"

    @classmethod
    def fresh(cls) -> "RunSecret":
        return cls(int.from_bytes(os.urandom(32), "little"))

    @property
    def run_id(self) -> str:
        """A public identifier of the run (one-way: it reveals nothing of the entropy)."""
        return hashlib.sha256(b"fedgen-debug run id:" + self.entropy.to_bytes(32, "little")).hexdigest()[:16]

    def seed_sequence(self, stream: str, *keys: int | str) -> np.random.SeedSequence:
        spawn = [_stream(stream)] + [_key(k) if isinstance(k, str) else int(k) for k in keys]
        return np.random.SeedSequence(self.entropy, spawn_key=tuple(spawn))

    def rng(self, stream: str, *keys: int | str) -> np.random.Generator:
        return np.random.default_rng(self.seed_sequence(stream, *keys))

    def tf_seed(self, stream: str, *keys: int | str) -> tuple[int, int]:
        """Two int64s for `tf.random.stateless_*` (non-negative, so any TF op accepts them)."""
        words = self.seed_sequence(stream, *keys).generate_state(2, np.uint64)
        return int(words[0] >> np.uint64(1)), int(words[1] >> np.uint64(1))

    def derive(self, stream: str, *keys: int | str) -> "RunSecret":
        """A secret of its own for a sub-run (a monitor's period runs): 256 bits of this secret's
        `stream`, so one provisioned monitor secret fixes every period's noise and sampling."""
        words = self.seed_sequence(stream, *keys).generate_state(4, np.uint64)
        return RunSecret(int.from_bytes(words.astype("<u8").tobytes(), "little"))

    def to_json(self) -> dict:
        return {"entropy": f"{self.entropy:064x}"}

    @classmethod
    def from_json(cls, data: dict) -> "RunSecret":
        return cls(int(data["entropy"], 16))


def load(run_dir: str) -> RunSecret | None:
    path = store.server(run_dir, store.SECRET)
    return RunSecret.from_json(store.read_json(path)) if os.path.exists(path) else None


def save(run_dir: str, secret: RunSecret) -> None:
    store.write_private_json(store.server(run_dir, store.SECRET), secret.to_json())
