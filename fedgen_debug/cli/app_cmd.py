"""`fedgen-debug app`: the Streamlit app on a run store, headless, with its URL printed."""

from __future__ import annotations

import os
import subprocess
import sys


def register(sub) -> None:
    app = sub.add_parser("app", help="start the Streamlit app on a run store (read-only)")
    app.add_argument("--runs", default="runs", help="the run store: a directory of run directories (default: runs)")
    app.add_argument("--port", type=int, default=8501)
    app.set_defaults(handler=run)


def command(runs: str, port: int) -> list[str]:
    import fedgen_debug.app

    script = os.path.join(list(fedgen_debug.app.__path__)[0], "main.py")
    # -P: no current directory on sys.path. Started in a checkout, `-m` would put the source tree's
    # fedgen_debug/ (which has no app/: setup.cfg maps it in) before the installed package.
    return [sys.executable, "-P", "-m", "streamlit", "run", script, "--server.headless", "true", "--server.port", str(port),
            "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer", "--", "--runs", os.path.abspath(runs)]


def run(args) -> int:
    if not os.path.isdir(args.runs):
        print(f"note: {args.runs} does not exist yet; the app will say so until runs appear (make demo).")
    print(f"fedgen-debug app on {os.path.abspath(args.runs)}: http://localhost:{args.port}", flush=True)
    return subprocess.call(command(args.runs, args.port))
