"""`fedgen-debug demo`: the main job, end to end on synthetic data.

Stage `data`: generate both synthetic federated datasets, apply both bugs as on-device preprocessing
and print what a modeler can see of them: DP counts and DP aggregates that signal trouble without
showing any example (the OOV rate of paper Table 6; the mean pixel intensity).
Stage `lm` (paper §5): DP char- and word-LMs before and after the tokenization bug, and the verdict;
each before/after pair trains side by side on two worker processes, the char pair and then the word
pair, while this process analyses the char pair (`--parallel-runs`, `runs.side_by_side`).
Stage `gan` (paper §6): DP-FedAvg-GANs on low- and high-accuracy users with the inversion bug and
after the fix, sample grids and the verdict; the primary CNN and the four GANs train on the same
workers, two runs at a time.
After each pair's verdict, its diagnosis (`analysis.diagnose`, as `fedgen-debug diagnose A B`: how B's
samples differ from A's, by family) on the verdict's own samples, in 2-3 lines and summary.json.
Every stage writes into --out; training runs resume when the demo is re-run, and nothing is charged
to the privacy ledger twice.

Privacy: before any stage runs, the demo adds up what all its releases will cost, per population. The
synthetic users are a simulation: a population that has no budget yet gets exactly that (printed). If
one was set before (a previous demo into another --out), the ledger decides, and refuses runs it does
not cover: deleting runs refunds nothing; use another --seed (other simulated users) or raise the
budget with `fedgen-debug ledger budget`.
"""

from __future__ import annotations

import os

from fedgen_debug.training.presets import DEFAULT_PRESET, PRESET_NAMES

STAGES = ("data", "lm", "gan")
# The demo offers every preset but the paper's: its networks and rounds take days on 2 CPU cores.
DEMO_PRESETS = tuple(name for name in PRESET_NAMES if name != "paper")


def register(sub) -> None:
    demo = sub.add_parser("demo", help="run the main job on synthetic data (the README's first command)")
    demo.add_argument("--out", default="runs/demo", help="directory for datasets, runs and summary.json")
    demo.add_argument("--writers", type=int, default=100, help="synthetic handwriting writers")
    demo.add_argument("--users", type=int, default=300, help="synthetic text users")
    demo.add_argument("--seed", type=int, default=0, help="public randomness: the simulated users, models' init, bugs")
    demo.add_argument("--concat-fraction", type=float, default=0.10,
                      help="fraction of sentences hit by the tokenization bug (paper §5: 10%%)")
    demo.add_argument("--invert-fraction", type=float, default=0.50,
                      help="fraction of devices hit by the pixel inversion (paper §6: 50%%)")
    demo.add_argument("--vocab-size", type=int, default=10000)
    demo.add_argument("--preset", choices=DEMO_PRESETS, default=DEFAULT_PRESET,
                      help="model/training sizes of the auxiliaries (test: seconds, for CI; not meaningful)")
    demo.add_argument("--gan-rounds", type=int, default=None,
                      help="rounds of each GAN (default: 150 with --preset demo, whose GANs `train-gan` trains "
                           "200: sharper samples, ~2 minutes more on 2 cores; the preset's with --preset test)")
    demo.add_argument("--parallel-runs", type=int, default=2,
                      help="LM and GAN runs trained at once, on as many worker processes "
                           "(1: one after another, in this process)")
    demo.add_argument("--stages", default=",".join(STAGES),
                      help=f"comma-separated subset of {','.join(STAGES)} (default: all)")
    demo.set_defaults(handler=run)


def gan_rounds(args) -> int | None:
    """Each demo GAN's rounds: --gan-rounds, else `demo_gan.DEMO_GAN_ROUNDS` for the demo preset."""
    from fedgen_debug.cli.demo_gan import DEMO_GAN_ROUNDS

    if args.gan_rounds is not None:
        return args.gan_rounds
    return DEMO_GAN_ROUNDS if args.preset == "demo" else None


def _specs(args) -> tuple[str, str]:
    return f"synthetic-text:users={args.users},seed={args.seed}", f"synthetic-images:writers={args.writers},seed={args.seed}"


def planned_records(args, stages) -> dict[str, list]:
    """Every DP release the demo's stages will make, by population (events only: placeholder ids)."""
    from fedgen_debug.cli import demo_data, demo_gan, demo_lm
    from fedgen_debug.data.spec import client_ids
    from fedgen_debug.privacy.ledger import population_key
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.experiments import gan, lm
    from fedgen_debug.training.loop import Population

    text_spec, image_spec = _specs(args)
    text = Population(population_key(text_spec), client_ids(text_spec))
    images = Population(population_key(image_spec), client_ids(image_spec))
    plan = {text.key: [], images.key: []}
    if "data" in stages:
        plan[text.key] += demo_data.stage_records("text", text.key, text.size, RunSecret.fresh(), "")
        plan[images.key] += demo_data.stage_records("images", images.key, images.size, RunSecret.fresh(), "")
    if "lm" in stages:
        for run, run_dir in demo_lm.stage_runs(text_spec, args.concat_fraction, os.path.join(args.out, "lm"), args.seed,
                                               args.preset, args.vocab_size).values():
            plan[text.key] += lm.release_records(run, text, RunSecret.fresh(), run_dir)
    if "gan" in stages:
        for run, run_dir in demo_gan.stage_runs(image_spec, args.invert_fraction, os.path.join(args.out, "gan"),
                                                args.seed, args.preset, gan_rounds(args)).values():
            plan[images.key] += gan.release_records(run, images, RunSecret.fresh(), run_dir)
    return {k: v for k, v in plan.items() if v}


def settle_budgets(args, stages) -> list[str]:
    """Sets the budget of a demo population that has none to what the demo needs; returns what to print."""
    from fedgen_debug.privacy.accounting import format_epsilon, format_guarantee
    from fedgen_debug.privacy.ledger import Ledger, composed_guarantee

    ledger = Ledger()
    lines = [f"privacy ledger: {ledger.path}"]
    for population, records in planned_records(args, stages).items():
        size = max(r.population_size for r in records)
        budget = ledger.budget(population, size)
        need = composed_guarantee(ledger.total(population, *records).releases, budget.delta)
        if budget.source == "default":
            ledger.set_budget(population, need.epsilon * 1.001, reason="fedgen-debug demo: simulated users; the "
                              "budget its releases need")
            lines.append(f"  {population}: {len(records)} DP releases need {format_guarantee(need)}; it had no budget, "
                         f"so the demo sets ε = {format_epsilon(need.epsilon * 1.001)} (simulated users; for real users the "
                         "budget is the data owner's: `fedgen-debug ledger budget`)")
        else:
            lines.append(f"  {population}: {len(records)} DP releases; budget ε = {format_epsilon(budget.epsilon)} (set before); "
                         "a re-run in the same --out charges nothing twice")
    return lines


def run(args) -> int:
    from fedgen_debug.cli.demo_data import print_data_stage, run_data_stage
    from fedgen_debug.cli.demo_gan import queue_primary, run_gan_stage
    from fedgen_debug.cli.demo_lm import finish_lm_stage, queue_lm_stage
    from fedgen_debug.runs import store
    from fedgen_debug.runs.side_by_side import SideBySide

    if args.writers < 1 or args.users < 1:
        raise ValueError(f"--writers and --users must be >= 1. Found {args.writers}, {args.users}.")
    if args.parallel_runs < 1:
        raise ValueError(f"--parallel-runs must be >= 1. Found {args.parallel_runs}.")
    if args.gan_rounds is not None and args.gan_rounds < 1:
        raise ValueError(f"--gan-rounds must be >= 1. Found {args.gan_rounds}.")
    stages = [s for s in args.stages.split(",") if s]
    if not stages or any(s not in STAGES for s in stages):
        raise ValueError(f"--stages must be a comma-separated subset of {','.join(STAGES)}. Found {args.stages!r}.")
    os.makedirs(args.out, exist_ok=True)
    summary_path = os.path.join(args.out, store.SUMMARY)
    # Stages may run separately (--stages); each one updates its part of summary.json.
    summary = store.read_json(summary_path) if os.path.exists(summary_path) else {}
    print("\n".join(settle_budgets(args, stages)))
    text_spec, image_spec = _specs(args)
    if "data" in stages:
        summary.update(run_data_stage(args.out, args.users, args.writers, args.seed, args.concat_fraction,
                                      args.invert_fraction, args.vocab_size))
        store.write_json(summary_path, summary)
        print_data_stage(summary, args.out)
    # One set of worker processes for both stages' training runs (they keep TF imported between runs),
    # taking calls in the order queued: the LM runs, then the primary CNN (while this process analyses
    # the word-LMs), then the GANs. Tried and measured slower (docs/performance.md, "The char-LM's
    # clients vectorized" and "A CPU without AVX-512"): every run queued before the data stage with the
    # primary CNN first, or with the longest GAN (with the bug, low accuracy) between the LM pairs, where
    # that GAN and the word-LMs slowed each other more than two runs of a kind do. Nor did the primary
    # CNN alone queued before the data stage, beside it: the data stage and the char-LMs were as much
    # slower as the GANs started sooner.
    gan_out = os.path.join(args.out, "gan")
    with SideBySide(args.parallel_runs if {"lm", "gan"} & set(stages) else 1) as workers:
        lm = None
        if "lm" in stages:
            lm = queue_lm_stage(text_spec, args.concat_fraction, os.path.join(args.out, "lm"), args.seed,
                                args.preset, args.vocab_size, workers)
        primary = queue_primary(gan_out, args.preset, args.seed, workers) if "gan" in stages else None
        if lm is not None:
            summary["lm"] = finish_lm_stage(lm)
            store.write_json(summary_path, summary)
        if "gan" in stages:
            summary["gan"] = run_gan_stage(image_spec, args.invert_fraction, gan_out, args.seed, args.preset,
                                           workers, primary, rounds=gan_rounds(args))
            store.write_json(summary_path, summary)
    print("\n" + "\n".join(closing_summary(args, stages, summary)))
    return 0


def closing_summary(args, stages, summary: dict) -> list[str]:
    """The demo's one closing block: each story's verdict with its z and threshold (as in summary.json),
    each pair's diagnosis in a line, ε per population (the ledger's totals) and where the files are."""
    from fedgen_debug.cli.diagnose_cmd import brief_line
    from fedgen_debug.cli.privacy_flags import weak_privacy_mark
    from fedgen_debug.privacy.accounting import format_epsilon
    from fedgen_debug.privacy.ledger import Ledger
    from fedgen_debug.stats import Z_THRESHOLD

    def answer(yes: bool) -> str:
        return "YES" if yes else "no"

    lines = ["summary of the demo"]
    if {"lm", "gan"} & set(stages):
        lines.append("  verdicts:")
    if "lm" in stages:
        for kind in ("char", "word"):
            story, e = summary["lm"][kind], summary["lm"][kind]["evidence"]
            lines.append(f"    tokenization bug, {kind}-LM after vs before: {answer(story['tokenization_bug_suspected'])} "
                         f"({e['test'].replace('baseline', 'before')}: z = {e['z']:.1f}, threshold {Z_THRESHOLD:g})")
    if "gan" in stages:
        for phase in ("with_bug", "after_fix"):
            story, e = summary["gan"][phase], summary["gan"][phase]["evidence"]
            path = e.get("training_path") or {}
            lines.append(f"    pixel inversion, {phase.replace('_', ' ')}: {answer(story['pixel_inversion_suspected'])}"
                         f"{' (INCONCLUSIVE)' if story['inconclusive'] else ''} ({e['test']}: z = {e['z']:.1f}, "
                         f"threshold {e['z_threshold']:g}{'; YES along training' if path.get('suspected') else ''})")
    stories = ([(f"tokenization bug, {kind}-LM after vs before", summary["lm"][kind]) for kind in ("char", "word")]
               if "lm" in stages else [])
    stories += ([(f"pixel inversion, {phase.replace('_', ' ')}, low vs high accuracy", summary["gan"][phase])
                 for phase in ("with_bug", "after_fix")] if "gan" in stages else [])
    diagnosed = [(name, story["diagnosis"]) for name, story in stories if "diagnosis" in story]
    if diagnosed:
        lines.append("  diagnoses (`fedgen-debug diagnose A B`, in B's released/diagnosis.json):")
        lines += [f"    {name}: {brief_line(diagnosis)}" for name, diagnosis in diagnosed]
    lines.append("  privacy spent on the demo's populations (all releases in the ledger):")
    ledger = Ledger()
    for population in sorted({r.population for rs in planned_records(args, stages).values() for r in rs}):
        total = ledger.total(population)
        lines.append(f"    {population}: ε = {format_epsilon(total.guarantee.epsilon)} at δ = {total.guarantee.delta:.3g} over "
                     f"{len(total.releases)} releases{weak_privacy_mark(total.guarantee.as_dict())}")
    lines.append(f"  files: summary.json, datasets and run directories are in {args.out}/")
    return lines
