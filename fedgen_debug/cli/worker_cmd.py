"""`fedgen-debug worker --port P`: one of the TFF workers `--workers HOST:PORT,...` runs rounds on."""

from __future__ import annotations

import logging
import signal
import subprocess

logger = logging.getLogger(__name__)


def register(sub) -> None:
    worker = sub.add_parser("worker", help="run a TFF worker for --workers (listens on all interfaces: see the "
                                           "warning it prints)")
    worker.add_argument("--port", type=int, required=True, help="the port it serves on (1-65535)")
    worker.set_defaults(handler=run)


def run(args) -> int:
    from fedgen_debug import tff_workers

    if not 1 <= args.port <= 65535:
        raise ValueError(f"--port must be in 1-65535. Found {args.port}.")
    logger.warning(tff_workers.EXPOSURE_WARNING.format(port=args.port))
    process = tff_workers.start_worker(args.port)   # dies with this command, however it ends
    try:
        tff_workers.wait_ready(f"localhost:{args.port}", process=process)
        print(f"TFF worker {process.pid} ready on port {args.port}; Ctrl-C stops it", flush=True)
        return process.wait()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
