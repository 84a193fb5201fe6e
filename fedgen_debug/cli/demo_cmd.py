"""`fedgen-debug demo`: the main job, end to end on synthetic data.

Stage `data`: generate both synthetic federated datasets, apply both bugs as on-device preprocessing
and print what a modeler can see of them: dataset sizes and the federated aggregates that signal
trouble without showing any example (the OOV rate of paper Table 6; the mean pixel intensity).
Stage `lm` (paper §5): DP char- and word-LMs before and after the tokenization bug, and the verdict.
Stage `gan` (paper §6): DP-FedAvg-GANs on low- and high-accuracy users with the inversion bug and
after the fix, sample grids and the verdict.
Every stage writes into --out; training runs resume when the demo is re-run.
"""

from __future__ import annotations

import os

from fedgen_debug.progress import progress

STAGES = ("data", "lm", "gan")


def register(sub) -> None:
    demo = sub.add_parser("demo", help="run the main job on synthetic data (the README's first command)")
    demo.add_argument("--out", default="runs/demo", help="directory for datasets and summary.json")
    demo.add_argument("--writers", type=int, default=100, help="synthetic handwriting writers")
    demo.add_argument("--users", type=int, default=300, help="synthetic text users")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--concat-fraction", type=float, default=0.10,
                      help="fraction of sentences hit by the tokenization bug (paper §5: 10%%)")
    demo.add_argument("--invert-fraction", type=float, default=0.50,
                      help="fraction of devices hit by the pixel inversion (paper §6: 50%%)")
    demo.add_argument("--vocab-size", type=int, default=10000)
    demo.add_argument("--preset", choices=("demo", "test"), default="demo",
                      help="model/training sizes of the auxiliaries (test: seconds, for CI; not meaningful)")
    demo.add_argument("--stages", default=",".join(STAGES),
                      help=f"comma-separated subset of {','.join(STAGES)} (default: all)")
    demo.set_defaults(handler=run)


def _oov_rates(client_data, vocab_size: int, bug) -> dict:
    """Device-reported OOV rate (paper Table 6) without the bug, with it, and after the fix."""
    from fedgen_debug.bugs.tokenization import tokenize_client
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.data.text import Vocabulary, oov_rate

    per_client = {cid: [t.decode() for t in cd.client_numpy(client_data, cid)["text"]] for cid in client_data.client_ids}
    clean = [toks for cid, s in per_client.items() for toks in tokenize_client(cid, s, None)]
    # The production vocabulary predates the bug: it is built from correctly tokenized text.
    vocab = Vocabulary.from_sentences(clean, vocab_size)
    rates = {"without_bug": oov_rate(clean, vocab)}
    for name, variant in (("with_bug", bug), ("after_fix", bug.as_fixed())):
        tokens = []
        for cid, sentences in progress(per_client.items(), desc=f"tokenizing on devices ({name})"):
            tokens.extend(tokenize_client(cid, sentences, variant))
        rates[name] = oov_rate(tokens, vocab)
    return {k: round(v, 5) for k, v in rates.items()}


def _mean_intensity(client_data) -> float:
    from fedgen_debug.data import client_data as cd

    totals = [(float(cd.client_numpy(client_data, c)["pixels"].sum()), cd.num_examples(client_data, c))
              for c in progress(client_data.client_ids, desc="device aggregates")]
    return round(sum(t for t, _ in totals) / (sum(n for _, n in totals) * 28 * 28), 5)


def run(args) -> int:
    from fedgen_debug.training.run_dir import read_json, write_json

    if args.writers < 1 or args.users < 1:
        raise ValueError(f"--writers and --users must be >= 1. Found {args.writers}, {args.users}.")
    stages = [s for s in args.stages.split(",") if s]
    if not stages or any(s not in STAGES for s in stages):
        raise ValueError(f"--stages must be a comma-separated subset of {','.join(STAGES)}. Found {args.stages!r}.")
    os.makedirs(args.out, exist_ok=True)
    summary_path = os.path.join(args.out, "summary.json")
    # Stages may run separately (--stages); each one updates its part of summary.json.
    summary = read_json(summary_path) if os.path.exists(summary_path) else {}
    text_spec = f"synthetic-text:users={args.users},seed={args.seed}"
    if "data" in stages:
        summary.update(_data_stage(args, text_spec))
        write_json(summary_path, summary)
        _print_summary(summary, args.out)
    if "lm" in stages:
        from fedgen_debug.cli.demo_lm import run_lm_stage

        summary["lm"] = run_lm_stage(text_spec, args.concat_fraction, os.path.join(args.out, "lm"), args.seed,
                                     args.preset, args.vocab_size)
        write_json(summary_path, summary)
    if "gan" in stages:
        from fedgen_debug.cli.demo_gan import run_gan_stage

        summary["gan"] = run_gan_stage(f"synthetic-images:writers={args.writers},seed={args.seed}",
                                       args.invert_fraction, os.path.join(args.out, "gan"), args.seed, args.preset)
        write_json(summary_path, summary)
    print(f"\nsummary.json, datasets and run directories are in {args.out}/")
    return 0


def _data_stage(args, text_spec: str) -> dict:
    from fedgen_debug.bugs import PixelInversionBug, TokenizationBug
    from fedgen_debug.cli.data_cmd import size_summary
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.data import jsonl, npz, synthetic_images, synthetic_text

    concat_bug = TokenizationBug(args.concat_fraction, seed=args.seed)
    invert_bug = PixelInversionBug(args.invert_fraction, seed=args.seed)
    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
    text = synthetic_text.generate(synthetic_text.SyntheticTextConfig(users=args.users, seed=args.seed))
    jsonl.write_jsonl(text, os.path.join(args.out, "data", "synthetic_text.jsonl"))
    images = synthetic_images.generate(synthetic_images.SyntheticImagesConfig(writers=args.writers, seed=args.seed))
    npz.write_npz(images, os.path.join(args.out, "data", "synthetic_images.npz"))
    return {
        "text": {
            "data": text_spec,
            **size_summary(cd.client_sizes(text)),
            "bug": f"tokenization: first two tokens glued in {args.concat_fraction:.0%} of sentences",
            "oov_rate": _oov_rates(text, args.vocab_size, concat_bug),
        },
        "images": {
            "data": f"synthetic-images:writers={args.writers},seed={args.seed}",
            **size_summary(cd.client_sizes(images)),
            "bug": f"pixel inversion on {args.invert_fraction:.0%} of devices",
            "mean_pixel_intensity": {
                "without_bug": _mean_intensity(images),
                "with_bug": _mean_intensity(invert_bug.apply(images)),
                "after_fix": _mean_intensity(invert_bug.as_fixed().apply(images)),
            },
        },
    }


def _print_summary(summary: dict, out: str) -> None:
    t, i = summary["text"], summary["images"]
    print("fedgen-debug demo — synthetic federated data with injected bugs")
    print(f"\n[text]   {t['data']}: {t['clients']} users, {t['examples']} sentences "
          f"(median {t['examples_per_client']['median']:g} per user)")
    print(f"         bug: {t['bug']}")
    o = t["oov_rate"]
    print(f"         OOV rate (device-reported): without bug {o['without_bug']:.2%} | with bug "
          f"{o['with_bug']:.2%} | after fix {o['after_fix']:.2%}")
    print(f"\n[images] {i['data']}: {i['clients']} writers, {i['examples']} images "
          f"(median {i['examples_per_client']['median']:g} per writer)")
    print(f"         bug: {i['bug']}")
    m = i["mean_pixel_intensity"]
    print(f"         mean pixel intensity (federated aggregate): without bug {m['without_bug']:.3f} | "
          f"with bug {m['with_bug']:.3f} | after fix {m['after_fix']:.3f}")
