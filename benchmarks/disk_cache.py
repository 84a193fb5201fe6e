"""Benchmark: what a new process pays without and with the disk cache (`fedgen_debug/disk_cache.py`), in
one run, each measured in a fresh Python process (after its imports) so that no process-level cache helps:

  .venv/bin/python benchmarks/disk_cache.py [--events 12] [--writers 30] [--users 200]

1. a ledger of --events distinct DP-FedAvg releases composed (every command that checks a release);
2. `synthetic-images:writers=W` and `synthetic-text:users=U` loaded (every process of a demo or sweep).
Each is timed cold (`FEDGEN_DEBUG_CACHE=off`), then once to fill an empty cache, then from it; the values
from the cache must be the cold ones, byte for byte. Prints seconds and the cold / cached ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import hashlib, json, sys, time
what, n = sys.argv[1], int(sys.argv[2])
from fedgen_debug.privacy import accounting
from fedgen_debug.data import client_data as cd, spec
start = time.perf_counter()   # after the imports: what the cache saves, not what TensorFlow costs
if what == "ledger":
    events = [accounting.DPFedAvgPrivacy(20, 400, 0.8 + 0.05 * i, 50).dp_event() for i in range(n)]
    value = repr(accounting.epsilon_of_events(events, 1e-5).epsilon)
else:
    data = spec.load_client_data(f"synthetic-images:writers={n},seed=7" if what == "images" else f"synthetic-text:users={n},seed=7")
    h = hashlib.sha256()
    for cid in data.client_ids:
        for name, array in sorted(cd.client_numpy(data, cid).items()):
            h.update(array.tobytes() if array.dtype != object else b"\0".join(array.tolist()))
    value = h.hexdigest()
print(json.dumps({"seconds": time.perf_counter() - start, "value": value}))
"""


def _child(what: str, n: int, cache: str) -> dict:
    env = {**os.environ, "FEDGEN_DEBUG_CACHE": cache, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", CHILD, what, str(n)], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=12)
    parser.add_argument("--writers", type=int, default=30)
    parser.add_argument("--users", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        for what, n in (("ledger", args.events), ("images", args.writers), ("text", args.users)):
            cold = _child(what, n, "off")
            filling = _child(what, n, cache)
            cached = _child(what, n, cache)
            same = cold["value"] == filling["value"] == cached["value"]
            print(f"{what:6} n={n:<4} cold {cold['seconds']:6.2f} s  filling {filling['seconds']:6.2f} s  "
                  f"from the cache {cached['seconds']:6.2f} s  ratio {cold['seconds'] / cached['seconds']:5.1f}x  "
                  f"values equal: {same}")
            if not same:
                raise SystemExit(f"{what}: the cached values differ from the computed ones")


if __name__ == "__main__":
    main()
