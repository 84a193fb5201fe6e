"""`fedgen-debug doctor`: versions of the stack and one real federated computation through TFF."""

from __future__ import annotations

import json
import os


def register(sub) -> None:
    doctor = sub.add_parser("doctor", help="check the installed stack and run a tiny TFF computation")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(handler=run)


def federated_mean_check(values=(1.0, 2.0, 6.0)) -> float:
    """Runs `federated_mean` over len(values) clients on TFF's C++ runtime (starts worker_binary)."""
    import numpy as np
    import tensorflow_federated as tff

    from fedgen_debug import tff_workers

    tff_workers.use_context()

    @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
    def mean(client_values):
        return tff.federated_mean(client_values)

    return float(mean([np.float32(v) for v in values]))


def run(args) -> int:
    import dp_accounting
    import numpy as np
    import tensorflow as tf
    import tensorflow_federated as tff
    import tensorflow_privacy

    from fedgen_debug import __version__
    from fedgen_debug.tff_workers import WORKERS_ENV, parse_workers
    from fedgen_debug.training.config import resolve_backend
    from fedgen_debug.training.tf_backend import client_threads

    report = {
        "fedgen_debug": __version__,
        "tensorflow": tf.__version__,
        "tensorflow_federated": tff.__version__,
        "tensorflow_privacy": getattr(tensorflow_privacy, "__version__", "?"),
        "dp_accounting": getattr(dp_accounting, "__version__", "?"),
        "numpy": np.__version__,
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "devices": ", ".join(d.name for d in tf.config.list_logical_devices()),
        # TF places the tf backend's work on a GPU when it sees one; TFF's pip runtime is CPU-only.
        "backend": resolve_backend(),
        "client_threads": client_threads(),
        # Where TFF's computations run: a local worker that dies with this process, or --workers.
        "tff_workers": ",".join(parse_workers(os.environ.get(WORKERS_ENV))) or "local",
        "federated_mean_of_1_2_6": federated_mean_check(),
    }
    report["ok"] = abs(report["federated_mean_of_1_2_6"] - 3.0) < 1e-6
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in report.items():
            print(f"{k:28s} {v}")
    return 0 if report["ok"] else 1
