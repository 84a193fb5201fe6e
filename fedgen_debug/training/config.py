"""Frozen, validated configuration of a DP-FedAvg training run. CLI flags only build these."""

from __future__ import annotations

import dataclasses
import math

from fedgen_debug.privacy.accounting import SAMPLINGS, WITHOUT_REPLACEMENT

SERVER_OPTIMIZERS = ("sgd", "momentum", "nesterov")


def _positive(name: str, value: float) -> None:
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{name} must be > 0. Found {value}.")


@dataclasses.dataclass(frozen=True)
class DPConfig:
    """User-level DP of the aggregate: clip each client update to L2 ≤ `clip`, average over the fixed
    `clients_per_round` (qN) and add N(0, σ²), σ = z·clip/qN. `clip=None` and z=0 is plain FedAvg
    through the same code path."""

    clients_per_round: int
    noise_multiplier: float = 0.0
    clip: float | None = None

    def __post_init__(self):
        if self.clients_per_round < 1:
            raise ValueError(f"clients_per_round must be >= 1. Found {self.clients_per_round}.")
        if not self.noise_multiplier >= 0 or math.isinf(self.noise_multiplier):
            raise ValueError(f"noise_multiplier must be >= 0. Found {self.noise_multiplier}.")
        if self.clip is not None:
            _positive("clip", self.clip)
        elif self.noise_multiplier > 0:
            raise ValueError("noise_multiplier > 0 needs a clip (the noise is calibrated to it). Found clip=None.")

    @property
    def noise_stddev(self) -> float:
        """σ = zS/(qN), the std of the noise added to the averaged update."""
        if self.clip is None:
            return 0.0
        return self.noise_multiplier * self.clip / self.clients_per_round


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 0.5

    def __post_init__(self):
        if self.epochs < 1:
            raise ValueError(f"client epochs must be >= 1. Found {self.epochs}.")
        if self.batch_size < 1:
            raise ValueError(f"client batch_size must be >= 1. Found {self.batch_size}.")
        _positive("client learning_rate", self.learning_rate)


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    optimizer: str = "sgd"
    learning_rate: float = 1.0
    momentum: float = 0.9

    def __post_init__(self):
        if self.optimizer not in SERVER_OPTIMIZERS:
            raise ValueError(f"server optimizer must be one of {SERVER_OPTIMIZERS}. Found {self.optimizer!r}.")
        _positive("server learning_rate", self.learning_rate)
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"server momentum must be in [0, 1). Found {self.momentum}.")


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    rounds: int
    dp: DPConfig
    client: ClientConfig = ClientConfig()
    server: ServerConfig = ServerConfig()
    seed: int = 0
    sampling: str = WITHOUT_REPLACEMENT
    eval_every: int = 0
    checkpoint_every: int = 10

    def __post_init__(self):
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1. Found {self.rounds}.")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}. Found {self.sampling!r}.")
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0 (0 = never). Found {self.eval_every}.")
        if self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1. Found {self.checkpoint_every}.")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "TrainingConfig":
        return cls(**{**data, "dp": DPConfig(**data["dp"]), "client": ClientConfig(**data["client"]),
                      "server": ServerConfig(**data["server"])})
