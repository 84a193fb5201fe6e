"""`fedgen-debug demo`: the main job, end to end on synthetic data.

For now (Foundation): generate both synthetic federated datasets, apply both bugs as on-device
preprocessing, and print what a modeler can see of them: dataset sizes and the federated aggregates
that signal trouble without showing any example (the OOV rate of paper Table 6; the mean pixel
intensity over devices). Later stages add the primary models, DP auxiliaries and verdicts.
"""

from __future__ import annotations

import os

from fedgen_debug.progress import progress


def register(sub) -> None:
    demo = sub.add_parser("demo", help="run the main job on synthetic data (the README's first command)")
    demo.add_argument("--out", default="runs/demo", help="directory for datasets and summary.json")
    demo.add_argument("--writers", type=int, default=100, help="synthetic handwriting writers")
    demo.add_argument("--users", type=int, default=500, help="synthetic text users")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--concat-fraction", type=float, default=0.10,
                      help="fraction of sentences hit by the tokenization bug (paper §5: 10%%)")
    demo.add_argument("--invert-fraction", type=float, default=0.50,
                      help="fraction of devices hit by the pixel inversion (paper §6: 50%%)")
    demo.add_argument("--vocab-size", type=int, default=10000)
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
    from fedgen_debug.bugs import PixelInversionBug, TokenizationBug
    from fedgen_debug.cli.data_cmd import size_summary
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.data import jsonl, npz, synthetic_images, synthetic_text
    from fedgen_debug.data.atomic import write_json

    if args.writers < 1 or args.users < 1:
        raise ValueError(f"--writers and --users must be >= 1. Found {args.writers}, {args.users}.")
    concat_bug = TokenizationBug(args.concat_fraction, seed=args.seed)
    invert_bug = PixelInversionBug(args.invert_fraction, seed=args.seed)
    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)

    text = synthetic_text.generate(synthetic_text.SyntheticTextConfig(users=args.users, seed=args.seed))
    jsonl.write_jsonl(text, os.path.join(args.out, "data", "synthetic_text.jsonl"))
    images = synthetic_images.generate(synthetic_images.SyntheticImagesConfig(writers=args.writers, seed=args.seed))
    npz.write_npz(images, os.path.join(args.out, "data", "synthetic_images.npz"))

    summary = {
        "text": {
            "data": f"synthetic-text:users={args.users},seed={args.seed}",
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
    write_json(os.path.join(args.out, "summary.json"), summary)
    _print_summary(summary, args.out)
    return 0


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
    print(f"\nDatasets and summary.json written to {out}/")
    print("Next stages (DP auxiliaries, verdicts) arrive with the LM and GAN scenarios.")
