"""`fedgen-debug data inspect|make`: counts about a federated dataset, and writing synthetic ones."""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from fedgen_debug.data import spec as data_spec

FORMATS = ("npz", "jsonl", "tff-sqlite")


def register(sub) -> None:
    data = sub.add_parser("data", help="inspect or make federated datasets",
                          description="Data specs:\n" + data_spec.SPEC_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    data_sub = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    inspect = data_sub.add_parser("inspect", help="client count and DP counts of examples (never raw examples; "
                                  "each call is a DP release charged to the ledger)")
    inspect.add_argument("spec", help="data spec, e.g. synthetic-images:writers=100")
    inspect.add_argument("--public", action="store_true",
                         help="the data is public (e.g. a public stand-in): exact counts, nothing charged; refused "
                         "for users the ledger holds DP releases on")
    inspect.add_argument("--declare-public", metavar="REASON",
                         help="with --public, on users the ledger knows: the data owner declares them public "
                         "(recorded in the ledger with REASON)")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.set_defaults(handler=run_inspect)

    make = data_sub.add_parser("make", help="write a dataset as npz / JSONL / TFF sqlite")
    make.add_argument("spec", help="data spec, e.g. synthetic-text:users=500,seed=1")
    make.add_argument("--out", required=True,
                      help="output file (.npz / .jsonl), or the cache directory for --format tff-sqlite")
    make.add_argument("--format", choices=FORMATS,
                      help="default: from the --out suffix (.npz, .jsonl; no suffix: tff-sqlite)")
    make.set_defaults(handler=run_make)


# Each client's example count, capped, as one DP sum; and its size class (log2 bins) as a DP histogram.
EXAMPLES_CAP = 1024
SIZE_BINS = 12  # [1], [2, 3], [4, 7], ..., [1024, 2047], [2048, ∞)


def size_bin(count: int) -> int:
    return min(max(int(count), 1).bit_length() - 1, SIZE_BINS - 1)


def dp_size_summary(sizes: dict[str, int], population: str, label: str = "data inspect", run_dir: str | None = None,
                    secret=None) -> dict:
    """Client count (public: N is public under replace-one), the DP total of examples (each client's
    count capped at EXAMPLES_CAP) and a DP histogram of client sizes, charged to the ledger first."""
    from fedgen_debug.privacy import aggregates
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.privacy.run_ledger import charge

    secret = secret or RunSecret.fresh()
    total_spec = aggregates.BoundedSum(f"{label}: examples", (float(EXAMPLES_CAP),), noise_multiplier=4.0)
    hist_spec = aggregates.Histogram(f"{label}: client sizes", SIZE_BINS, noise_multiplier=2.0)
    counts = np.array(list(sizes.values()))
    records = [aggregates.aggregate_record(spec, population, len(counts), f"{secret.run_id}/{spec.name}", run_dir or label)
               for spec in (total_spec, hist_spec)]
    total_privacy = charge(records, run_dir)[population]
    delta = total_privacy.guarantee.delta
    total = aggregates.compute(total_spec, counts[:, None], secret)
    hist = aggregates.compute(hist_spec, [size_bin(c) for c in counts], secret)
    cumulative = np.cumsum(np.clip(hist.values, 0, None))
    median_bin = int(np.searchsorted(cumulative, cumulative[-1] / 2))
    return {"clients": int(len(counts)), "dp": True,
            "examples": round(float(total.values[0]), 1), "examples_stddev": round(float(total.stddev[0]), 1),
            "examples_cap_per_client": EXAMPLES_CAP,
            "client_size_histogram": [{"from": 2 ** b, "to": (2 ** (b + 1) - 1) if b < SIZE_BINS - 1 else None,
                                       "clients": round(float(v), 1)} for b, v in enumerate(hist.values)],
            "client_size_histogram_stddev": round(float(hist_spec.stddev), 2),
            "median_client_size_bin": [2 ** median_bin, 2 ** (median_bin + 1) - 1],
            # Each release's ε, for the report to say (the charge only logs it).
            "privacy": {"releases": [{"label": r.label, **r.guarantee(delta).as_dict()} for r in records],
                        "population_total": {**total_privacy.guarantee.as_dict(),
                                             "releases": len(total_privacy.releases)}}}


def size_summary(sizes: dict[str, int]) -> dict:
    """Exact counts: for public data only."""
    counts = np.array(list(sizes.values()))
    q = np.percentile(counts, [25, 50, 75])
    return {
        "clients": int(len(counts)),
        "examples": int(counts.sum()),
        "examples_per_client": {
            "min": int(counts.min()), "p25": float(q[0]), "median": float(q[1]),
            "mean": round(float(counts.mean()), 2), "p75": float(q[2]), "max": int(counts.max()),
        },
    }


def _check_public(spec, client_ids, declared_reason: str | None) -> None:
    """Exact counts only of users the ledger holds no DP release on, unless the data owner declares
    them public (recorded, so the declaration is on the ledger's record)."""
    from fedgen_debug.privacy.ledger import Ledger

    ledger = Ledger()
    known = ledger.known_users(spec, client_ids)
    if not known:
        return
    if declared_reason is None:
        raise ValueError(f"{spec}: the ledger holds DP releases on users of this data ({', '.join(known)}), so it is "
                         "private and its exact counts are not shown. Drop --public for DP counts, or, if the data "
                         "owner says this data is public, add --declare-public REASON (recorded in the ledger).")
    ledger.declare_public(ledger.population_key(spec, client_ids), declared_reason)


def run_inspect(args) -> int:
    from fedgen_debug.cli.privacy_flags import release_line, weak_privacy_mark
    from fedgen_debug.privacy.accounting import format_epsilon
    from fedgen_debug.data import client_data as cd

    spec = data_spec.parse_data_spec(args.spec)
    client_data = data_spec.load_client_data(spec)
    sizes = cd.client_sizes(client_data)
    if args.declare_public is not None and not args.public:
        raise ValueError("--declare-public goes with --public.")
    if args.public:
        _check_public(spec, client_data.client_ids, args.declare_public)
        summary = {"spec": str(spec), "modality": spec.modality, "public": True, **size_summary(sizes)}
    else:
        from fedgen_debug.privacy.ledger import population_key

        population = population_key(spec, client_data.client_ids)
        summary = {"spec": str(spec), "population": population, "modality": spec.modality,
                   **dp_size_summary(sizes, population)}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{summary['spec']} ({summary['modality']})")
    print(f"  clients:  {summary['clients']}")
    if args.public:
        s = summary["examples_per_client"]
        print(f"  examples: {summary['examples']} (public data: exact)")
        print(f"  examples per client: min {s['min']}, p25 {s['p25']:g}, median {s['median']:g}, "
              f"mean {s['mean']:g}, p75 {s['p75']:g}, max {s['max']}")
        return 0
    print(f"  examples: ≈ {summary['examples']:,.0f} ± {summary['examples_stddev']:,.0f} (DP; each client counted up "
          f"to {EXAMPLES_CAP})")
    print(f"  median client size: {summary['median_client_size_bin'][0]}–{summary['median_client_size_bin'][1]} "
          f"examples (DP histogram, ± {summary['client_size_histogram_stddev']:g} clients per bin)")
    privacy = summary["privacy"]
    print(f"  privacy: {len(privacy['releases'])} DP releases charged to the ledger for {summary['population']} "
          "(`fedgen-debug ledger`)")
    for release in privacy["releases"]:
        print("    " + release_line(release))
    total = privacy["population_total"]
    print(f"    population {summary['population']}, all releases so far ({total['releases']}): ε = "
          f"{format_epsilon(total['epsilon'])} at δ = {total['delta']:.3g}{weak_privacy_mark(total)}")
    return 0


def _format_for(out: str, fmt: str | None) -> str:
    if fmt:
        return fmt
    suffix = os.path.splitext(out)[1].lower()
    if suffix and suffix not in (".npz", ".jsonl"):   # a file name meant as a file: not a cache directory
        raise ValueError(f"--out {out}: {suffix} is no format the tool writes; name it .npz or .jsonl, or give "
                         "--format (tff-sqlite writes a cache directory).")
    return {".npz": "npz", ".jsonl": "jsonl"}.get(suffix, "tff-sqlite")


def run_make(args) -> int:
    from fedgen_debug.data import jsonl, npz, tff_sqlite
    from fedgen_debug.data import client_data as cd

    spec = data_spec.parse_data_spec(args.spec)
    fmt = _format_for(args.out, args.format)
    images = spec.modality == cd.IMAGES
    if fmt == "npz" and not images or fmt == "jsonl" and images:
        raise ValueError(f"--format {fmt} holds {'images' if fmt == 'npz' else 'text'}; {spec} is {spec.modality}.")
    client_data = data_spec.load_client_data(spec)
    if fmt == "npz":
        npz.write_npz(client_data, args.out)
        path = args.out
    elif fmt == "jsonl":
        jsonl.write_jsonl(client_data, args.out)
        path = args.out
    elif images:
        path = tff_sqlite.write_emnist_sqlite(client_data, args.out)
    else:
        path = tff_sqlite.write_stackoverflow_sqlite(client_data, args.out)
    if spec.source.startswith("synthetic"):
        sizes = cd.client_sizes(client_data)
        print(f"wrote {path}: {len(sizes)} clients, {sum(sizes.values())} examples ({fmt})")
    else:  # counts of private data are released only as DP counts (`data inspect`)
        print(f"wrote {path} ({fmt})")
    return 0
