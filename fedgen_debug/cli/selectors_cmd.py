"""`fedgen-debug selectors`: the selection criteria T1-T6 with their settings."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("selectors", help="list the selection criteria (T1-T6) and their settings")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run)


def run(args) -> int:
    from fedgen_debug.selectors.registry import __doc__ as usage, describe_all

    rows = describe_all()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        argument = f":{'|'.join(row['choices'])}" if row["choices"] else ""
        settings = ", ".join(f"{k}={v}" for k, v in row["settings"].items() if k != row["argument"])
        print(f"{row['task']}  {row['name']}{argument}")
        print(f"      {row['summary']}")
        if settings:
            print(f"      settings: {settings}")
        if row["needs_outputs"]:
            print(f"      device-side outputs: {', '.join(row['needs_outputs'])}")
    print("\n" + " ".join(usage.split()))
    return 0
