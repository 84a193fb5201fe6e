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

    inspect = data_sub.add_parser("inspect", help="client/example counts and per-client size statistics "
                                  "(never raw examples)")
    inspect.add_argument("spec", help="data spec, e.g. synthetic-images:writers=100")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.set_defaults(handler=run_inspect)

    make = data_sub.add_parser("make", help="write a dataset as npz / JSONL / TFF sqlite")
    make.add_argument("spec", help="data spec, e.g. synthetic-text:users=500,seed=1")
    make.add_argument("--out", required=True,
                      help="output file (.npz / .jsonl), or the cache directory for --format tff-sqlite")
    make.add_argument("--format", choices=FORMATS,
                      help="default: from the --out suffix (.npz, .jsonl; otherwise tff-sqlite)")
    make.set_defaults(handler=run_make)


def size_summary(sizes: dict[str, int]) -> dict:
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


def run_inspect(args) -> int:
    from fedgen_debug.data import client_data as cd

    spec = data_spec.parse_data_spec(args.spec)
    client_data = data_spec.load_client_data(spec)
    summary = {"spec": str(spec), "modality": spec.modality, **size_summary(cd.client_sizes(client_data))}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        s = summary["examples_per_client"]
        print(f"{summary['spec']} ({summary['modality']})")
        print(f"  clients:  {summary['clients']}")
        print(f"  examples: {summary['examples']}")
        print(f"  examples per client: min {s['min']}, p25 {s['p25']:g}, median {s['median']:g}, "
              f"mean {s['mean']:g}, p75 {s['p75']:g}, max {s['max']}")
    return 0


def _format_for(out: str, fmt: str | None) -> str:
    if fmt:
        return fmt
    suffix = os.path.splitext(out)[1].lower()
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
    sizes = cd.client_sizes(client_data)
    print(f"wrote {path}: {len(sizes)} clients, {sum(sizes.values())} examples ({fmt})")
    return 0
