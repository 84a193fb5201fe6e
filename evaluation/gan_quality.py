"""GAN sample quality of a training configuration, before/after a preset change, over seeds: Fréchet
distance and classifier score in the primary CNN's feature space, the share of samples the CNN
classifies confidently (top-class probability > 0.9), the near-duplicate (mode collapse) share, and
the blank / noise shares of the analysis. Prints one JSON row per (data, config, seed), writes each
run's 64-sample grid, and a summary table at the end.

  .venv/bin/python evaluation/gan_quality.py --configs before,demo --seeds 0,1,2,3,4 \\
      --data npz:../shared/data/femnist_real_184_writers.npz \\
      --primary runs/eval-monitor/primary-femnist-seed0.npz --out runs/eval-gan-quality/femnist

What runs: `train_gan` through the one sweep loop (`experiments.sweep`), as `train-gan` and `make demo`
train (on the backend `$FEDGEN_DEBUG_BACKEND` picks; default `tf`: all clients of a round in one
vectorized call). Selection is T4 "low" under strict selection at the `--qualify` quantile of user
accuracy before the update (`by-user-accuracy:low,quantile=Q`: a DP quantile, as a run releases
it; every other sampled writer sends a zero update that still counts in the fixed qN). Each run is an
ordinary run directory (`OUT/CONFIG-seedS[-roundsR]`), so an interrupted evaluation resumes, and is
charged to the privacy ledger ($FEDGEN_DEBUG_LEDGER): an evaluation needs a budget that covers its
runs (`fedgen-debug ledger budget '*' --epsilon inf --reason evaluation` for "no-noise"). Until issue 54
this script ran the round functions in a plain TF loop of its own, with exact quantiles and nothing charged; its
numbers in docs/gan.md are from that loop. "before" is the demo preset as it was until issue 15
(client D learning rate 0.0005, D dense 64, generator Adam 0.001, clip 0.1); "clip0.1" the preset
until its clip went to 0.5; "no-noise" the preset without DP noise; "demo" is the current preset (one
pass over a client's images: on FEMNIST's low-accuracy writers, 30 images each, one D step a round);
"cycle" the preset with clients short of n·B images cycling through them to take all n steps
(`--cycle-client-data`; docs/gan.md). Configs combine left to right with "+" (`cycle+no-noise`:
cycling without DP noise); a config other than "demo" is saved in the run's config ("tuning"), so a
resume must match it. `--gen-ema 0.9` trains with `train-gan --gen-ema 0.9` (the released generator is
the moving average of G's weights: server-side post-processing, no privacy cost; its row is
`CONFIG@ema0.9`). `--measure-at 120,150` also trains runs of those rounds (each a run of its own, with
its own secret: not the same trajectory as the longer run's first rounds). The median norm of the
client updates is no longer measured (null in the rows):

  .venv/bin/python evaluation/gan_quality.py --configs clip0.1,demo,no-noise --seeds 0,1,2 \
      --data synthetic-images:writers=100,seed=0 --primary runs/demo/gan/primary_cnn.npz --out runs/eval-gan-clip
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Before TensorFlow: the package turns oneDNN on, without which a CPU lacking AVX-512 cannot run the
# vectorized GAN round (the tf backend then fell back to clients one by one, unlike `make demo`).
import fedgen_debug  # noqa: E402,F401
import numpy as np  # noqa: E402

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.models import cnn, gan as gan_models  # noqa: E402
from fedgen_debug.models.gan import to_unit  # noqa: E402
from fedgen_debug.analysis import gan_analysis  # noqa: E402
from fedgen_debug.device import gan_data  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402
from fedgen_debug.training import presets, primary_cnn  # noqa: E402
from fedgen_debug.training import run_dir as rd  # noqa: E402
from fedgen_debug.training.config import ServerConfig  # noqa: E402
from fedgen_debug.training.gan_run import GANRun  # noqa: E402

# Overrides of the current demo preset: (GANConfig fields, GANTrainingConfig fields, client D learning
# rate, DPConfig fields[, the D's ServerConfig]). "before": the demo preset until issue 15's first change; "clip0.1": the preset
# until its clip went from 0.1 to 0.5; "no-noise": the preset without DP noise (what the noise costs).
CONFIGS = {"demo": ({}, {}, None, {}),
           "before": ({"disc_dense": 64}, {"gen_learning_rate": 0.001}, 0.0005, {"clip": 0.1}),
           "clip0.1": ({}, {}, None, {"clip": 0.1}),
           "no-noise": ({}, {}, None, {"noise_multiplier": 0.0}),
           "cycle": ({}, {"cycle_client_data": True}, None, {}),
           # Capacity: a critic with twice the channels and dense units, and a generator with twice the
           # channels (larger D moved the synthetic Fréchet from 163 to 118 at S = 0.1, docs/gan.md).
           "big-d": ({"disc_channels": (16, 32), "disc_dense": 32}, {}, None, {}),
           "big-dg": ({"disc_channels": (16, 32), "disc_dense": 32, "gen_channels": (64, 32, 16)}, {}, None, {}),
           # The critic's server step: the same DP mean of the clients' D deltas, applied with heavy-ball
           # momentum or Adam (FedAdam) instead of SGD at 1.0. Centrally, the demo G and D draw characters
           # on the same writers' images (Fréchet 35, docs/gan.md): the federated critic is what lags.
           "d-momentum": ({}, {}, None, {}, ServerConfig("momentum", 1.0, 0.9)),
           "d-adam": ({}, {}, None, {}, ServerConfig("adam", 0.003, 0.5)),
           # The critic's server step × 4 = qN / k̂ with a quarter of the writers qualifying: what
           # `train-gan --d-step selected` does (post-processing of the DP counts; the same ε).
           "d-step-x4": ({}, {}, None, {}, ServerConfig("sgd", 4.0)),
           # The critic's work against the generator's (without DP noise, cycling clients still draw
           # speckled strokes, 41 vs 48 on seed 0; the central critic, Adam at 3 steps a G step, does not):
           # a client learning rate 2.5× the preset's, 12 client steps instead of n = 6, or a G phase every
           # 4 D rounds instead of 2 (half the G steps).
           "d-lr-x2.5": ({}, {}, 0.05, {}),
           "d-steps-12": ({}, {"disc_steps": 12}, None, {}),
           "g-every-4": ({}, {"disc_rounds_per_gen_update": 4}, None, {}),
           # The generator's steps: centrally, the same G and D reach Fréchet 45 after 900 G steps (what
           # 300 demo rounds take) and 35 after 1,800; a G phase every D round gives 1,800 in 300 rounds.
           "g-every-1": ({}, {"disc_rounds_per_gen_update": 1}, None, {}),
           # G's upsampling: a bilinear resize then a 3×3 convolution instead of the transposed k4 s2
           # (centrally, 900 G steps: Fréchet 45.1 → 27.9, and the speckle around the strokes is gone; with
           # DP and cycling better on 4 of 5 seeds, but one diverged to a dark texture: docs/gan.md).
           "bilinear": ({"gen_upsample": "bilinear"}, {}, None, {}),
           # The generator's Adam step halved (0.0003 → 0.00015): a slower G against the same noisy critic.
           "g-lr-half": ({}, {"gen_learning_rate": 0.00015}, None, {})}
CONFIDENT_ABOVE = 0.9
SAMPLES = 1000


def overrides(name: str) -> tuple:
    """A config's overrides; "a+b" applies a's, then b's (`cycle+no-noise`: cycling without DP noise)."""
    model_fields, training_fields, disc_lr, dp_fields, server = {}, {}, None, {}, []
    for part in name.split("+"):
        if part not in CONFIGS:
            raise SystemExit(f"unknown config {part!r}; known: {', '.join(CONFIGS)} (combine with '+')")
        m, t, lr, dp, *srv = CONFIGS[part]
        model_fields, training_fields, dp_fields = {**model_fields, **m}, {**training_fields, **t}, {**dp_fields, **dp}
        disc_lr, server = lr if lr is not None else disc_lr, srv or server
    return model_fields, training_fields, disc_lr, dp_fields, *server


def tuned(model_config, training, name: str):
    """The model and training configs with the overrides of config `name` ("a+b": a's, then b's)."""
    model_fields, training_fields, disc_lr, dp_fields, *server = overrides(name)
    model = dataclasses.replace(model_config, **model_fields)
    if server:
        training = dataclasses.replace(training, training=dataclasses.replace(training.training, server=server[0]))
    training = dataclasses.replace(training, training=dataclasses.replace(
        training.training, dp=dataclasses.replace(training.training.dp, **dp_fields)))
    if disc_lr is not None:
        training = dataclasses.replace(training, training=dataclasses.replace(
            training.training, client=dataclasses.replace(training.training.client, learning_rate=disc_lr)))
    return model, dataclasses.replace(training, **training_fields)


def configs(name: str, seed: int):
    """The demo preset's model and training configs with config `name`'s overrides."""
    return tuned(presets.gan_model_config("demo"), presets.gan_training_config("demo", seed), name)


@dataclasses.dataclass(frozen=True)
class TunedGANRun(GANRun):
    """A GAN run of the demo preset with a config of `CONFIGS` ("demo": the preset as it is, saved as a
    plain `GANRun`). The tuning is part of the run's saved config, so a resume must match it."""

    tuning: str = "demo"

    def __post_init__(self):
        overrides(self.tuning)   # validates
        super().__post_init__()

    def model_config(self):
        return tuned(super().model_config(), presets.gan_training_config(self.preset, self.seed), self.tuning)[0]

    def training_config(self, population: int):
        return tuned(super().model_config(), super().training_config(population), self.tuning)[1]

    def to_json(self) -> dict:
        return self.saved_json(("canaries", "classes", "d_step", "cycle_client_data", "gen_ema", "gen_upsample",
                                "tuning"))


def low_accuracy_writers(data, primary, share: float) -> set[str]:
    """T4 "low" with exact quantiles: the writers whose primary-model accuracy is at or below the
    `share` quantile (`gan_central_reference.py`'s writers; the runs here select with a DP quantile)."""
    accuracy = gan_data.user_accuracies(data, primary)
    cut = float(np.quantile(list(accuracy.values()), share))
    return {c for c, a in accuracy.items() if a <= cut}


def trained_generator(run_dir: str):
    """The released generator of a finished run of this evaluation."""
    run = TunedGANRun(**store.finished_run_config(run_dir, "gan", "train-gan")["gan"])
    generator = gan_models.build_generator(run.model_config(), run.seed)
    rd.load_model_weights(run_dir, generator)
    return generator


def quality(generator, primary, primary_path: str) -> tuple[dict, np.ndarray]:
    noise = np.random.default_rng(0).standard_normal((SAMPLES, generator.input_shape[-1])).astype(np.float32)
    images = generator(noise, training=False).numpy()
    measured = gan_analysis.sample_quality(primary, images, primary_cnn.reference_statistics(primary_path),
                                           primary_cnn.reference_nearest(primary_path))
    logits = cnn.logits(primary, to_unit(images)).astype(np.float64)
    top = 1.0 / np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)
    return {"frechet": round(measured["frechet_distance"], 1),
            "classifier_score": round(measured["classifier_score"], 2),
            "confident": float(np.mean(top > CONFIDENT_ABOVE)),
            "near_duplicates": measured.get("near_duplicates", {}).get("share"),
            "blank": gan_analysis.blank_samples(images)["share"], "noise": gan_analysis.noise_samples(images)["share"],
            "dark": gan_analysis.dark_background(images)["share"]}, images


def _comparison(rows: list[dict], path: str) -> None:
    """The first seed's grids of each config side by side (left to right in --configs order)."""
    from PIL import Image

    first = {}
    for r in rows:
        first.setdefault(r["config"], r["grid"])
    if len(first) < 2:
        return
    grids = [Image.open(g) for g in first.values()]
    gap = 16
    out = Image.new("L", (sum(g.width for g in grids) + gap * (len(grids) - 1), grids[0].height), 255)
    for i, grid in enumerate(grids):
        out.paste(grid, (i * (grid.width + gap), 0))
    out.save(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="synthetic-images:writers=100,seed=100")
    parser.add_argument("--primary", required=True, help="primary CNN weights (its reference statistics beside it)")
    parser.add_argument("--configs", default="before,demo")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--rounds", type=int, default=None, help="default: the preset's")
    parser.add_argument("--measure-at", default="",
                        help="comma-separated rounds also measured, each a run of its own of that many rounds, "
                             "each a row with its round count")
    parser.add_argument("--qualify", type=float, default=0.25, help="share of writers that train (T4 low)")
    parser.add_argument("--vectorized", action="store_true",
                        help="kept for the commands in docs/: every run trains as train-gan does, on the tf "
                             "backend's vectorized clients unless $FEDGEN_DEBUG_BACKEND says tff")
    parser.add_argument("--gen-ema", type=float, default=0.0,
                        help="train with train-gan's --gen-ema DECAY (the released generator is a moving average "
                             "of G's weights); rows CONFIG@emaDECAY")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    os.makedirs(args.out, exist_ok=True)
    primary = primary_cnn.load_primary_cnn(args.primary)
    if not 0.0 <= args.gen_ema < 1.0:
        raise SystemExit(f"--gen-ema must be in [0, 1). Found {args.gen_ema}.")
    if not 0.0 < args.qualify < 1.0:
        raise SystemExit(f"--qualify must be in (0, 1). Found {args.qualify}.")
    measure_at = tuple(int(r) for r in args.measure_at.split(",") if r)
    select = f"by-user-accuracy:low,quantile={args.qualify:g}"
    ema = f"@ema{args.gen_ema:g}" if args.gen_ema else ""
    comparisons = []
    for name in args.configs.split(","):
        overrides(name)   # an unknown config stops the evaluation before anything trains
        for seed in (int(s) for s in args.seeds.split(",")):
            def arm(rounds: int | None) -> Arm:
                run_dir = os.path.join(args.out, f"{name}{ema}-seed{seed}" + (f"-rounds{rounds}" if rounds else ""))
                return Arm(f"rounds {rounds}" if rounds else "run", run_dir, TunedGANRun(
                    args.data, select, preset="demo", seed=seed, primary=os.path.abspath(args.primary),
                    rounds=rounds or args.rounds, gen_ema=args.gen_ema, tuning=name))

            comparisons.append(Comparison(f"{name}-seed{seed}", (arm(None), *[arm(r) for r in measure_at]),
                                          {"config": name + ema, "seed": seed}))
    sweep = Sweep(comparisons)

    def measured_rows(comparison) -> list[dict]:
        out = []
        for arm in comparison.arms:
            population = store.read_json(store.released(arm.run_dir, store.POPULATION))
            generator = trained_generator(arm.run_dir)
            measured, samples = quality(generator, primary, args.primary)
            rounds = arm.run.training_config(population["users_total"]).training.rounds
            grid = os.path.join(args.out, os.path.basename(arm.run_dir) + ".png")
            gan_analysis.sample_grid_png(samples[:64], grid)
            np.savez(grid.replace(".png", ".weights.npz"),   # to look again without retraining
                     *[v.numpy() for v in generator.trainable_variables + generator.non_trainable_variables])
            row = {"data": args.data, "config": comparison.about["config"], "seed": comparison.about["seed"],
                   "rounds": rounds, "qualified": round(population["users"], 1), "qualified_dp": True,
                   "writers": population["users_total"], "median_update_norm": None,
                   "seconds": round(sweep.train_seconds.get(arm.run_dir, 0.0)), **measured, "grid": grid}
            print(json.dumps(row), flush=True)
            with open(os.path.join(args.out, "rows.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            out.append(row)
        return out

    rows = [row for rows_of in sweep.collect(measured_rows) for row in rows_of]
    _comparison(rows, os.path.join(args.out, "comparison.png"))
    print(f"\n{'config':<8}{'seed':>5}{'rounds':>7}{'Fréchet':>9}{'cls score':>10}{'confident':>10}{'near dup':>9}{'noise':>7}"
          f"{'blank':>7}")
    for r in rows:
        print(f"{r['config']:<8}{r['seed']:>5}{r['rounds']:>7}{r['frechet']:>9.1f}{r['classifier_score']:>10.2f}{r['confident']:>10.1%}"
              f"{r['near_duplicates'] or 0:>9.1%}{r['noise']:>7.0%}{r['blank']:>7.0%}")


if __name__ == "__main__":
    main()
