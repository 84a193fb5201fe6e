"""`fedgen-debug` entry point: argument parsing, logging, and turning errors into clear messages."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from fedgen_debug import log_setup

logger = logging.getLogger("fedgen_debug")


def _build_parser() -> argparse.ArgumentParser:
    from fedgen_debug import __version__
    from fedgen_debug.cli import (app_cmd, data_cmd, demo_cmd, diagnose_cmd, doctor_cmd, gan_cmd, lm_cmd,
                                  memorization_cmd, monitor_cmd, privacy_cmd, selectors_cmd, worker_cmd)

    parser = argparse.ArgumentParser(
        prog="fedgen-debug",
        description="Debug private, decentralized data with DP federated generative models.",
    )
    parser.add_argument("--version", action="version", version=f"fedgen-debug {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    parser.add_argument("--backend", choices=("tf", "tff"), default=None,
                        help="who runs the training rounds: tf (in-process TensorFlow, the default; a GPU when "
                             "present) or tff (TFF's runtime, the reference). Same results, resumable on either")
    parser.add_argument("--workers", metavar="HOST:PORT,...", default=None,
                        help="run the rounds on these TFF workers (`fedgen-debug worker --port P` on each), "
                             "clients split across them by TFF's mergeable context; implies --backend tff")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    data_cmd.register(sub)
    app_cmd.register(sub)
    demo_cmd.register(sub)
    doctor_cmd.register(sub)
    privacy_cmd.register(sub)
    selectors_cmd.register(sub)
    lm_cmd.register(sub)
    gan_cmd.register(sub)
    diagnose_cmd.register(sub)
    memorization_cmd.register(sub)
    monitor_cmd.register(sub)
    worker_cmd.register(sub)
    return parser


def _verbosity(argv: list[str]) -> int:
    count = 0
    for arg in argv:
        if arg == "--verbose":
            count += 1
        elif arg.startswith("-") and not arg.startswith("--") and set(arg[1:]) == {"v"}:
            count += len(arg) - 1
    return count


def _backend_environment(args) -> None:
    """--backend and --workers for the whole process and any process it starts (environment)."""
    from fedgen_debug.tff_workers import WORKERS_ENV, parse_workers
    from fedgen_debug.training.config import BACKEND_ENV

    if args.workers is not None:
        workers = parse_workers(args.workers)
        if args.backend == "tf":
            raise ValueError("--workers runs the rounds on TFF workers; it cannot go with --backend tf.")
        os.environ[WORKERS_ENV] = ",".join(workers)
        os.environ[BACKEND_ENV] = "tff"
    if args.backend:
        os.environ[BACKEND_ENV] = args.backend


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # TF's C++ start-up chatter (CUDA plugin probes, CPU feature notes) drowns the CLI's output on a
    # CPU machine; -vv shows it again. Must be set before anything imports TensorFlow.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if _verbosity(argv) >= 2 else "3")
    parser = _build_parser()
    args = parser.parse_args(argv)
    # Logs to stderr: at the default level only warnings no report says (`log_setup`).
    log_setup.configure(log_setup.level_of(args.verbose))
    # Imported here so that `--help` stays fast; TF/TFF load only for real work.
    from fedgen_debug import runtime
    from fedgen_debug.data.errors import DataError

    runtime.install_shutdown_hooks()
    try:
        _backend_environment(args)
        return int(args.handler(args) or 0)
    except (DataError, ValueError, FileNotFoundError) as e:
        if args.verbose >= 2:
            logger.exception("failed")
        print(f"fedgen-debug: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedgen-debug: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
