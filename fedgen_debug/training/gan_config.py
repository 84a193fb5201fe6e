"""DP-FedAvg-GAN settings (augenstein2020 Alg. 1, Table 9): the DP-FedAvg round of the discriminator
(a TrainingConfig) plus the generator's side and the D:G cadence."""

from __future__ import annotations

import dataclasses

from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig
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
        return out

    @classmethod
    def from_json(cls, data: dict) -> "GANTrainingConfig":
        return cls(**{**data, "training": TrainingConfig.from_json(data["training"])})


# The demo's DP: qN = 50, z = 0.3 (ε ≈ 8.8·10³ on 100 writers in 200 rounds; Table 9's qN = 10, z = 0.01:
# 8·10⁶). Under strict selection only the qualifying share of the sampled users contributes (about
# 12% of writers for "high"); with qN = 10 the high-accuracy GAN drew salt-and-pepper noise even at
# z = 0.01; with qN = 50 and z = 0.3 the low-accuracy GAN draws characters and the high-accuracy one
# sparse strokes on white (measured; docs/gan.md). S = 0.5 (was 0.1; ε depends on z, not S):
# the synthetic writers' client updates have median norm ~0.5, so at 0.1 the clip, not the noise, held
# the critic back (without any noise: Fréchet 161 vs 163 with it), and the generator drew speckled blobs;
# at 0.5 it draws characters (Fréchet 163 → 67 on seed 0; FEMNIST, whose updates are ~0.1: 85 → 88).
DEMO_DP = DPConfig(clients_per_round=50, noise_multiplier=0.3, clip=0.5)


def gan_training_config(preset: str, seed: int = 0) -> GANTrainingConfig:
    """"paper": Table 9 (n = 6, B = 32, η_G = 0.005, η_D = 0.0005, S = 0.1, z = 0.01, qN = 10, T = 1000).
    "demo": `DEMO_DP`, 200 rounds, client D learning rate η_D = 0.02, an Adam generator (η_G = 0.0003,
    β1 = 0.5) and two D rounds per G update. Why η_D = 0.02, 40× Table 9's: at 0.0005 a client's 6 D
    steps move D by 0.01-0.02 in L2, a fifth of the clip S = 0.1, while the noise on the mean (zS/qN per
    coordinate) has norm ≈ 0.14: the critic learned from noise and the generator drew salt and pepper
    on real FEMNIST. At 0.02 the updates reach 0.06 on FEMNIST, 0.5 on synthetic (median norms), which
    the clip S = 0.5 passes on synthetic data (see `DEMO_DP`). η_G = 0.0003 (was 0.001): with the
    faster critic the generator at 0.001 collapsed to a few modes on the FEMNIST low-accuracy writers
    (60% near-duplicates). Measured with evaluation/gan_quality.py (docs/gan.md). Earlier: with
    Table 9's SGD generator 3 of 12 demo GANs collapsed to blank white images (the generator's steps
    grow with the critic's output scale until its tanh saturates); at 1:1 the generator outran the
    critic (all-black, and 127 vs 102 Fréchet at round 150 with the new η_D). Both take one pass over
    a client's images, as the paper's code does (`repeat=False`). `cycle_client_data` (opt-in,
    `train-gan --cycle-client-data`) takes all n steps instead: FEMNIST's low-accuracy GAN went from
    Fréchet 80 to 51 (5 seeds), but a ~19-writer high-accuracy GAN drew noise on 2 of 2 secrets
    (one pass: 0 of 2), so the demo keeps one pass (docs/gan.md).
    "test": 3 rounds of 2 clients × 2 steps, for tests.
    `eval_every`: how often the scenario snapshots the generator's samples (the app's round slider)."""
    table9 = dict(dp=DPConfig(clients_per_round=10, noise_multiplier=0.01, clip=0.1),
                  client=ClientConfig(epochs=1, batch_size=32, learning_rate=0.0005),
                  server=ServerConfig("sgd", 1.0), seed=seed)
    presets = {"paper": lambda: GANTrainingConfig(TrainingConfig(rounds=1000, eval_every=50, **table9)),
               "demo": lambda: GANTrainingConfig(TrainingConfig(rounds=200, eval_every=10, **{
                   **table9, "dp": DEMO_DP, "client": ClientConfig(epochs=1, batch_size=32, learning_rate=0.02)}),
                   gen_optimizer="adam", gen_learning_rate=0.0003, gen_beta_1=0.5, disc_rounds_per_gen_update=2),
               "test": lambda: GANTrainingConfig(
                   TrainingConfig(rounds=3, eval_every=1, **{**table9, "dp": DPConfig(2, 0.01, 0.1),
                                               "client": ClientConfig(1, 8, 0.0005)}),
                   disc_steps=2, gen_steps=2, gen_batch_size=8)}
    check_one_of("preset", preset, sorted(presets))
    return presets[preset]()
