"""The privacy flags every training command takes, and how a run's privacy is printed."""

from __future__ import annotations


def add_privacy_flags(parser) -> None:
    from fedgen_debug.privacy.accounting import SAMPLINGS, WITHOUT_REPLACEMENT

    group = parser.add_argument_group("privacy (defaults: the preset's)")
    group.add_argument("--noise-multiplier", type=float, metavar="Z", help="z: noise std zS on the sum of clipped updates")
    group.add_argument("--match-deployment", metavar="SPEC",
                       help="set z so that the noise on the mean update equals a deployment's: "
                            "N=USERS,qN=PER_ROUND,z=Z or N=USERS,epsilon=E[,qN=PER_ROUND] (z: the smallest reaching ε; "
                            "qN default 1000), rounds=T optional (default the run's); instead of --noise-multiplier")
    group.add_argument("--clip", type=float, metavar="S", help="S: L2 clip of each user's update")
    group.add_argument("--adaptive-clip", type=float, metavar="Q", dest="clip_quantile",
                       help="adapt the clip each round to the Q quantile of the norms of the updates users send "
                            "(0.5: their median), starting at S; estimated with DP within the same ε")
    group.add_argument("--clients-per-round", type=int, metavar="Q", help="qN: users sampled per round")
    group.add_argument("--rounds", type=int, metavar="T")
    group.add_argument("--delta", type=float, metavar="D", help="δ the run's ε is reported at (default 0.01/N; < 1/N)")
    group.add_argument("--sampling", choices=SAMPLINGS, default=WITHOUT_REPLACEMENT,
                       help="fixed-size rounds (replace-one accounting, sensitivity 2S) or Poisson (add/remove)")
    group.add_argument("--selection", choices=("strict", "paper"), default="strict",
                       help="strict: every user is sampled, non-qualifying devices send zero updates, ε over all "
                            "users; paper: only qualifying users, ε over them (augenstein2020; the server learns "
                            "who qualified, the modeler how many only as a DP count, and ε is over a DP lower "
                            "bound of it)")


def privacy_settings(args) -> dict:
    return {"rounds": args.rounds, "clients_per_round": args.clients_per_round, "noise_multiplier": args.noise_multiplier,
            "clip": args.clip, "delta": args.delta, "sampling": args.sampling, "selection": args.selection,
            "clip_quantile": args.clip_quantile, "match_deployment": args.match_deployment}


def privacy_lines(run_dir: str) -> list[str]:
    """The run's releases with their ε, and the population's total (from the released privacy.json)."""
    from fedgen_debug.privacy.accounting import format_epsilon
    from fedgen_debug.privacy.run_ledger import run_privacy

    privacy = run_privacy(run_dir)
    lines, training = [], None
    for release_id, release in privacy["releases"].items():
        lines.append("  " + release_line(release))
        if release_id.endswith("/training"):
            lines.extend(deployment_lines(release, run_dir))
            training = release
    if training is not None and len(privacy["releases"]) > 1:
        lines.extend(run_total_lines(privacy["releases"].values(), training))
    total = privacy["population_total"]
    lines.append(f"  population {privacy['population']} (N = {privacy['population_size']}), all releases so far "
                 f"({total['releases']}): ε = {format_epsilon(total['epsilon'])} at δ = {total['delta']:.3g}, budget ε = "
                 f"{format_epsilon(total['budget']['epsilon'])}{weak_privacy_mark(total)}")
    return lines


def release_line(release: dict) -> str:
    """One release's ε, marked when weak: the one place a command says it (`privacy.run_ledger.charge` only logs
    it at INFO)."""
    from fedgen_debug.privacy.accounting import format_epsilon

    return f"{release['label']}: ε = {format_epsilon(release['epsilon'])} at δ = {release['delta']:.3g}{weak_privacy_mark(release)}"


def weak_privacy_mark(guarantee: dict) -> str:
    from fedgen_debug.privacy.accounting import weak_privacy

    return f"  {weak_privacy()}" if guarantee["above_warning"] else ""


def run_total_lines(releases, training: dict) -> list[str]:
    """All of a run's releases at a deployment, composed (`privacy.deployment.total_equivalents`): what a
    data owner signs for the run, not its training alone."""
    from fedgen_debug.privacy import deployment
    from fedgen_debug.privacy.accounting import format_epsilon
    from fedgen_debug.privacy.ledger import PrivacyRecord

    total = deployment.total_equivalents([PrivacyRecord.from_json(r) for r in releases],
                                         training=training.get(deployment.RELEASE_KEY))
    parts = [f"ε ≤ {target} from N = {found['population']:,} (ε = {format_epsilon(found['epsilon'])}, δ = "
             f"{found['delta']:.2g})" if found else f"ε ≤ {target}: no N up to {deployment.MAX_POPULATION:.0e}"
             for target, found in total["smallest_deployment"].items()]
    kept = f"; kept as they are: {', '.join(total['kept_as_they_are'])}" if total["kept_as_they_are"] else ""
    return [f"    all {len(total['releases'])} releases of this run at a deployment (sampled rounds keep their noise on "
            f"the mean, DP counts and sums their noise per user{kept}): " + "; ".join(parts)]


def deployment_lines(release: dict, run_dir: str) -> list[str]:
    """What a training release's noise on the mean update is worth at a deployment
    (`privacy.deployment`): the smallest deployments where it is ε ≤ 1 and ≤ 10-DP, and the deployment
    its z was matched to. From the release's privacy.json entry; for runs from before it was recorded,
    computed from the run's configuration."""
    from fedgen_debug.privacy import deployment
    from fedgen_debug.runs import store

    equivalent = release.get(deployment.RELEASE_KEY)
    if deployment.RELEASE_KEY not in release:
        training = store.read_config(run_dir)["training"]
        dp = training["dp"]
        equivalent = deployment.release_annotation(dp["noise_multiplier"], dp["clients_per_round"], training["rounds"],
                                                   dp.get("matched_deployment"))
    if equivalent is None:
        return []
    return ["    " + line for line in deployment.summary_lines(equivalent)]
