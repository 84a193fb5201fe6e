"""T6 end to end at evaluation size: prints how much more often a T6 auxiliary writes about a topic
public text lacks than a T1 auxiliary. `.venv/bin/python evaluation/t6_public_density.py [--out DIR]`
(about 5 minutes on 2 CPU cores)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.experiments import t6_topic  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="runs directory (default: a temporary one)")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    out = args.out or tempfile.mkdtemp(prefix="t6-")
    config = t6_topic.T6Config(users=args.users, rounds=args.rounds, clients_per_round=30, client_epochs=3)
    report = t6_topic.run(config, out)
    print(json.dumps({"config": config.__dict__, "runs": out, **report}, indent=2))


if __name__ == "__main__":
    main()
