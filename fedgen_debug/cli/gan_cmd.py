"""`fedgen-debug train-gan` and `analyze-gan`: the pixel-inversion scenario (paper §6)."""

from __future__ import annotations

import json

from fedgen_debug.cli import preflight
from fedgen_debug.cli.privacy_flags import add_privacy_flags
from fedgen_debug.training.presets import DEFAULT_PRESET, PRESET_NAMES

COMMON_SELECTORS = ("by-user-accuracy:low", "by-user-accuracy:high", "by-example:correct", "by-example:misclassified",
                  "random")


def register(sub) -> None:
    train = sub.add_parser("train-gan", help="train a DP-FedAvg-GAN on the images a selector picks on each device")
    train.add_argument("--data", required=True, help="image data spec, e.g. synthetic-images:writers=100")
    train.add_argument("--bug", default=None, metavar="FAULT:FRACTION",
                       help="an image fault of the catalog on FRACTION of the devices (docs/data.md), e.g. invert:0.5 "
                            "(the app update's pixel inversion), rotate:0.5, blur:0.1,sigma=2")
    train.add_argument("--select", required=True, metavar="SELECTOR",
                       help=f"e.g. {', '.join(COMMON_SELECTORS)}, with settings (by-user-accuracy:low,threshold=0.8), "
                            "joined by & (all of) or | (any of); every selector: `fedgen-debug selectors`")
    train.add_argument("--preset", choices=PRESET_NAMES, default=DEFAULT_PRESET,
                       help="model and training sizes (training.presets.GAN_PRESETS); the privacy flags override them")
    train.add_argument("--primary", metavar="MODEL",
                       help="the model the users run: a Keras model file (.keras, .h5) or SavedModel directory "
                            "taking 28×28 grayscale images and returning class scores (docs/gan.md#your-own-primary-"
                            "model), or a primary CNN's .npz from a previous run; default: train one on clean "
                            "public stand-in data into the run directory")
    train.add_argument("--primary-background", choices=("white", "black"), default="white",
                       help="the paper colour your model expects: white (1.0 or 255; FEMNIST as TFF stores it) or "
                            "black (0; MNIST's convention)")
    train.add_argument("--primary-output", choices=("auto", "logits", "probabilities"), default="auto",
                       help="what your model returns (auto: probabilities when its last layer is a softmax)")
    train.add_argument("--primary-scale", type=float, choices=(1.0, 255.0), default=1.0,
                       help="your model's pixel range: 1 ([0, 1]) or 255 ([0, 255])")
    train.add_argument("--primary-classes", type=int, default=62, help="classes of a newly trained primary CNN")
    train.add_argument("--classes", type=int, default=None, metavar="K",
                       help="how many classes the users' data holds (the primary model's chance level is 1/K); "
                            "default: a DP count of the labels present (one more release in the ledger)")
    train.add_argument("--d-step", choices=("fixed", "selected"), default="fixed",
                       help="discriminator's server step under strict selection: fixed (the noised sum over qN, "
                            "Algorithm 1) or selected (over the DP estimate of the qualifying clients a round "
                            "samples: a small subpopulation, e.g. a 5th-percentile cut, trains as fast as a large "
                            "one; same ε)")
    add_sample_quality_flags(train)
    train.add_argument("--init", metavar="public:SPEC",
                       help="start DP-FedAvg from a GAN trained centrally on public images (e.g. "
                            "public:synthetic-images:writers=100,seed=1000); costs no ε. It can hide a bug: pretrained "
                            "GANs kept drawing light paper on 50%%-inverted devices, even without noise. Default: "
                            "fresh networks (docs/privacy.md)")
    train.add_argument("--seed", type=int, default=0, help="public randomness only: model init, simulated bug")
    train.add_argument("--canaries", nargs="?", const="default", default=None, metavar="SPEC",
                       help="insert glyph canaries for check-memorization (the same SPEC as train-lm --canaries: "
                            "thakkar[:p_u=P,p_e=Q], ramaswamy[:n_u=N,n_e=E], [,count=C], '+'; bare flag: both grids)")
    train.add_argument("--out", required=True, help="run directory (re-run the same command to resume)")
    add_privacy_flags(train)
    train.set_defaults(handler=run_train)

    analyze = sub.add_parser("analyze-gan", help="sample grids, quality and the pixel-inversion verdict")
    analyze.add_argument("run_dir")
    analyze.add_argument("--compare", help="a second GAN run (e.g. high-accuracy users, or after the fix)")
    analyze.add_argument("--samples", type=int, default=1000)
    analyze.add_argument("--json", action="store_true")
    analyze.set_defaults(handler=run_analyze)


def add_sample_quality_flags(parser) -> None:
    """The GAN's sample-quality options (train-gan's, and the evaluations' that train GANs); off by
    default, none changes ε."""
    parser.add_argument("--cycle-client-data", action="store_true",
                        help="a client with fewer than n·B images goes through them again to take all n D steps "
                             "(default: one pass, as the paper's code; same ε). Sharper samples from writers with few "
                             "images; on ~20 real FEMNIST writers it drew noise without the next two options "
                             "(docs/gan.md)")
    parser.add_argument("--gen-ema", type=float, default=0.0, metavar="DECAY",
                        help="release a moving average of the generator's weights over its training phases, e.g. "
                             "0.9 (default 0: the last generator). No privacy cost. With --cycle-client-data it helped "
                             "every FEMNIST seed (Fréchet 51 to 44, 5 seeds); with one pass it did not (docs/gan.md)")
    parser.add_argument("--gen-upsample", choices=("transpose", "bilinear"), default="transpose",
                        help="how the generator doubles its resolution: transpose (the paper code's k4 s2 transposed "
                             "convolution) or bilinear (a resize then a 3×3 convolution: no checkerboard speckle; "
                             "FEMNIST Fréchet 44 → 35 on 4 of 5 seeds, one diverged to a texture the verdict marks "
                             "inconclusive; docs/gan.md)")


def sample_quality_settings(args) -> dict:
    return {"cycle_client_data": args.cycle_client_data, "gen_ema": args.gen_ema, "gen_upsample": args.gen_upsample}


def run_train(args) -> int:
    preflight.check_data(args.data, "images", "train-gan")
    preflight.check_bug(args.bug, "images")
    preflight.check_selector(args.select)
    from fedgen_debug.cli.bug_arg import bug_settings
    from fedgen_debug.cli.privacy_flags import privacy_lines, privacy_settings
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.experiments.sweep import train_run
    from fedgen_debug.analysis.primary_fit import released_fit

    run = GANRun(data=args.data, select=args.select,
                 preset=args.preset, seed=args.seed, primary=args.primary, primary_classes=args.primary_classes,
                 primary_background=args.primary_background, primary_output=args.primary_output,
                 primary_scale=args.primary_scale,
                 canaries=args.canaries, classes=args.classes, d_step=args.d_step, init=args.init,
                 **sample_quality_settings(args), **bug_settings(args.bug, "images"), **privacy_settings(args))
    result = train_run(run, args.out)
    print(f"GAN trained for {result.rounds_completed} round{'' if result.rounds_completed == 1 else 's'}"
          + (f" (resumed at round {result.resumed_from})" if result.resumed_from else "") + f": {args.out}")
    print("\n".join(privacy_lines(args.out)))
    for warning in (released_fit(args.out) or {}).get("warnings", []):
        print(f"WARNING: {warning}")
    return 0


def run_analyze(args) -> int:
    preflight.check_runs(args.run_dir, args.compare)
    from fedgen_debug.analysis.gan_report import analyze_gan

    report = analyze_gan(args.run_dir, args.compare, samples=args.samples)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for line in format_report(report):
        print(line)
    return 0


def asks_the_working_side(report: dict) -> bool:
    """Whether an `analyze-gan` pair was given the other way round: RUN_DIR's selection gathers where the
    primary model works and --compare's where it fails (T4's high before low, T2's correct before
    misclassified), so the one-sided check reads the wrong GAN as the suspect (`Selector.failing`)."""
    from fedgen_debug.selectors.registry import failing_then_working

    return "compare" in report and failing_then_working(report["compare"]["select"], report["current"]["select"])


def format_report(report: dict) -> list[str]:
    from fedgen_debug.privacy.accounting import format_epsilon, weak_privacy
    from fedgen_debug.stats import indistinguishable_from_empty

    lines = []
    for name in ("current", "compare"):
        if name not in report:
            continue
        r = report[name]
        p, d, q = r["population"], r["dark_background"], r["quality"]
        eps = r["privacy"]["run"]
        lines.append(f"{name:8s} {r['run_dir']}  ({r['select']}: ≈{p['users']:.0f} ± {p['users_stddev']:.0f} of "
                     f"{p['users_total']} users, ≈{p['images']:.0f} ± {p['images_stddev']:.0f} images, DP counts; "
                     f"ε = {format_epsilon(eps['epsilon'])}{' ' + weak_privacy() if eps['above_warning'] else ''})")
        if r.get("d_step", {}).get("d_step") == "selected":
            step = r["d_step"]
            capped = step.get("count_scale", step["scale"]) > step["scale"]
            lines.append(f"         discriminator step over the qualifying clients: × {step['scale']:.3g} "
                         + (f"(× {step['count_scale']:.3g} from the DP count of users, capped where a round's "
                            f"noise moves D by {step['noise_step']:.2g})" if capped else "(from the DP count of users)"))
        lines.append(f"         dark-background samples {d['share']:.1%} ({d['dark']}/{d['samples']}), median "
                     f"background {d['median_background']:.2f}; Fréchet distance {q['frechet_distance']:.1f}, "
                     f"classifier score {q['classifier_score']:.2f}; grid {r['samples_png']}")
    for name in ("current", "compare"):
        p = report.get(name, {}).get("population")
        if p and indistinguishable_from_empty(p["users"], p["users_stddev"]):
            lines.append(f"WARNING: the {name} GAN's selection cannot be told from an empty one (DP count "
                         f"≈{p['users']:.0f} ± {p['users_stddev']:.0f} users): it learned little from users' data; "
                         "a broader cut (a higher quantile=) selects more")
    e = report["evidence"]
    warned = set()   # one warning a GAN, its first reason (noise has no background either)
    for kind, what in (("blank", "blank images"), ("noise", "noise images"),
                       ("no_background", "images without a background (a texture, not characters)")):
        for name in e.get(f"mostly_{kind}", []):
            if name in warned:
                continue
            warned.add(name)
            gan = "compare" if name == "reference" else "current"
            lines.append(f"WARNING: the {gan} GAN draws {what} ({e[kind][name]['share']:.0%} of samples): it did "
                         "not learn its data, so its dark-background share is no evidence; train longer, with more "
                         "clients per round or less noise")
    for warning in (report.get("primary_fit") or {}).get("warnings", []):
        lines.append(f"WARNING: {warning}")
    if asks_the_working_side(report):
        lines.append(f"WARNING: RUN_DIR holds {report['current']['select']} (where the primary model works) and "
                     f"--compare {report['compare']['select']} (where it fails): the check asks whether the working "
                     "side's backgrounds are the darker ones; the suspect goes first (`analyze-gan LOW --compare "
                     "HIGH`; `diagnose` reads a pair in either order)")
    path = e.get("training_path")
    if path and path["rounds_tested"]:
        lines.append(f"along training: {len(path['dark_rounds'])} of {path['rounds_tested']} snapshots darker than "
                     f"the {'reference' if report.get('compare') else 'noise floor'} (rounds "
                     f"{', '.join(map(str, path['dark_rounds'])) or 'none'}); largest z = {path['max_z']:.1f} at round "
                     f"{path['round_of_max_z']}, threshold {path['z_threshold']:.2f} for {path['rounds_tested']} tests")
    lines.append(f"pixel inversion suspected: {'YES' if report['pixel_inversion_suspected'] else 'no'}"
                 f"{' (INCONCLUSIVE)' if report['inconclusive'] else ''} "
                 f"({e['test']}: z = {e['z']:.1f}, threshold {e['z_threshold']:g}"
                 f"{'; YES along training' if path and path['suspected'] else ''})")
    return lines
