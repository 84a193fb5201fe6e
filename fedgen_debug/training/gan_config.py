"""DP-FedAvg-GAN settings (augenstein2020 Alg. 1, Table 9): the DP-FedAvg round of the discriminator
(a TrainingConfig) plus the generator's side and the D:G cadence. The presets' values are data in
`training.presets`."""

from __future__ import annotations

import dataclasses

from fedgen_debug.training.config import TrainingConfig
from fedgen_debug.validation import check_at_least, check_in_range, check_non_negative, check_one_of, check_positive

GEN_OPTIMIZERS = ("sgd", "adam")


@dataclasses.dataclass(frozen=True)
class GANTrainingConfig:
    """`training` holds the rounds, DP (qN, z, S), the client batch size B and learning rate η_D, the
    server's D optimizer and the seed; the rest is the generator's side and the round structure."""

    training: TrainingConfig
    disc_steps: int = 6               # n: at most n client D steps (batches of B) per round
    cycle_client_data: bool = False   # a client with < n·B examples goes through them again to take n steps
    gen_steps: int = 6                # generator steps per G phase
    gen_batch_size: int = 32
    gen_learning_rate: float = 0.005
    gen_optimizer: str = "sgd"
    gen_beta_1: float = 0.9           # Adam's first-moment decay (TF-GAN's GAN examples use 0.5)
    disc_rounds_per_gen_update: int = 1
    gradient_penalty: float = 10.0
    gen_ema: float = 0.0              # > 0: release a moving average of G's weights over G phases (this decay)

    def __post_init__(self):
        for name in ("disc_steps", "gen_steps", "gen_batch_size", "disc_rounds_per_gen_update"):
            check_at_least(name, getattr(self, name), 1)
        check_positive("gen_learning_rate", self.gen_learning_rate)
        check_in_range("gen_beta_1", self.gen_beta_1, 0.0, 1.0, high_inclusive=False)
        check_one_of("gen_optimizer", self.gen_optimizer, GEN_OPTIMIZERS)
        if not isinstance(self.cycle_client_data, bool):
            raise ValueError(f"cycle_client_data must be a bool. Found {self.cycle_client_data!r}.")
        check_in_range("gen_ema", self.gen_ema, 0.0, 1.0, high_inclusive=False)
        check_non_negative("gradient_penalty", self.gradient_penalty)
        if self.training.client.epochs != 1:
            raise ValueError(f"client epochs must be 1 (a client runs at most disc_steps batches). "
                             f"Found {self.training.client.epochs}.")

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        for name in ("cycle_client_data", "gen_ema"):   # off: runs saved before the option resume (no key)
            if not out[name]:
                del out[name]
        if out["training"]["dp"]["matched_deployment"] is None:   # likewise (`DPConfig.matched_deployment`)
            del out["training"]["dp"]["matched_deployment"]
        return out

    @classmethod
    def from_json(cls, data: dict) -> "GANTrainingConfig":
        return cls(**{**data, "training": TrainingConfig.from_json(data["training"])})
