"""Probe of an LM's client training settings (issue 15: a round's examples capped, the client rate):
one demo-preset run before the bug (0%, seed 2S) and one after (`--fraction`, seed 2S + 1) on synthetic
text of 300 users, trained with the given local settings (each flag left out: the preset's), analysed with
`analyze_lm` (the verdict's z, the top 20, the most probable words with a space) and, for the char-LM,
the mean log-probability of the after-devices' OOV words under the after-model (how well it fits; a
simulation-side number, read from the devices' data, never released). Prints one JSON row.

  .venv/bin/python evaluation/lm_client_probe.py --kind char --seed 0 --out runs/probe-char    # the demo preset
  .venv/bin/python evaluation/lm_client_probe.py --kind char --epochs 2 --rounds 120 --out runs/probe-c2x120
  .venv/bin/python evaluation/lm_client_probe.py --kind word --cap 32 --out runs/probe-w32

`--cap 0` trains on every example (the demo preset until issue 15). `--only none` analyses existing
run directories (`OUT/char-before`, `OUT/char-after`) without training. Runs are charged to the ledger
($FEDGEN_DEBUG_LEDGER) as any run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug.device.tokenization import TokenizationBug  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402
from fedgen_debug.models.char_lm import joint_log_prob  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, run_sweep  # noqa: E402
from fedgen_debug.device import lm_data  # noqa: E402
from fedgen_debug.analysis.lm_analysis import analyze_lm  # noqa: E402
from fedgen_debug.training.config import ClientConfig  # noqa: E402
from fedgen_debug.training import lm_run, presets  # noqa: E402

DATA = "synthetic-text:users=300,seed=0"


def train_seconds(run_dir: str) -> float | None:
    rows = store.read_csv(store.server(run_dir, store.TIMING))
    return round(sum(float(r["seconds"]) for r in rows), 1) if rows else None


def mean_oov_log_prob(run_dir: str, fraction: float, words_max: int = 3000) -> float:
    """Mean log p of the OOV words of every third device (with the run's bug) under the run's model."""
    model, vocab, run = lm_run.load_lm(run_dir)
    client_data = data_spec.load_client_data(DATA)
    words = []
    for cid in sorted(client_data.client_ids)[::3]:
        tokens = lm_data.device_tokens(client_data, cid, TokenizationBug(fraction, seed=run.seed))
        words += lm_data.device_oov_words(tokens, vocab, cid)
    words = words[:words_max]
    return float(joint_log_prob(model, words).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", default="char", choices=presets.LM_KINDS)
    parser.add_argument("--rounds", type=int, help="default: the demo preset's")
    parser.add_argument("--epochs", type=int, help="default (as every client flag): the demo preset's")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--lr", type=float, help="client learning rate")
    parser.add_argument("--cap", type=int, help="max examples a device trains on a round (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--only", default="before,after", help="which runs to train ('none': analyse only)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    preset = presets.LM_PRESETS[("demo", args.kind)]
    client = preset.training.client
    # The settings used, in the printed row too.
    args.rounds = args.rounds or preset.training.rounds
    args.epochs, args.batch, args.lr = (args.epochs or client.epochs, args.batch or client.batch_size,
                                        args.lr or client.learning_rate)
    args.cap = (client.max_examples or 0) if args.cap is None else args.cap
    presets.LM_PRESETS[("demo", args.kind)] = dataclasses.replace(preset, training=dataclasses.replace(
        preset.training, rounds=args.rounds, client=ClientConfig(args.epochs, args.batch, args.lr, args.cap or None)))
    arms = []
    for name, fraction, seed in (("before", 0.0, 2 * args.seed), ("after", args.fraction, 2 * args.seed + 1)):
        run = lm_run.LMRun(args.kind, DATA, fraction, "demo", seed=seed) if name in args.only.split(",") else None
        arms.append(Arm(name, os.path.join(args.out, f"{args.kind}-{name}"), run))   # no run: analysed as it is

    def analyze(comparison) -> dict:
        dirs = comparison.run_dirs
        report = analyze_lm(dirs["after"], dirs["before"], samples=args.samples)
        row = {**vars(args), "z": report["evidence"]["z"], "suspected": report["tokenization_bug_suspected"],
               "train_s": {name: train_seconds(d) for name, d in dirs.items()}}
        if args.kind == "char":
            current = report["current"]
            row.update(space_mass=[current["space_mass"], report["baseline"]["space_mass"]],
                       top20_with_space=[current["top_k_with_space"], report["baseline"]["top_k_with_space"]],
                       top8=[t["word"] for t in current["top_k"][:8]],
                       space_top8=[t["word"] for t in current["space_top_k"][:8]],
                       mean_oov_log_prob=mean_oov_log_prob(dirs["after"], args.fraction))
        return row

    (row,) = run_sweep([Comparison(f"{args.kind} probe", tuple(arms))], analyze)
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
