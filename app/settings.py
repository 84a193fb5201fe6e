"""Where the app looks: the run store and the privacy ledger, from the script's arguments (after
`streamlit run main.py --`) or the environment."""

from __future__ import annotations

import argparse
import os
import sys

RUNS_ENV = "FEDGEN_DEBUG_RUNS"


def _arguments(argv=None):
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--runs", default=os.environ.get(RUNS_ENV, "runs"))
    parser.add_argument("--ledger", default=None)
    return parser.parse_known_args(sys.argv[1:] if argv is None else argv)[0]


def runs_root(argv=None) -> str:
    """`--runs DIR`, else $FEDGEN_DEBUG_RUNS, else ./runs."""
    return os.path.abspath(_arguments(argv).runs)


def ledger_home(argv=None) -> str | None:
    """`--ledger DIR`, else None: the ledger's own default ($FEDGEN_DEBUG_LEDGER or ~/.fedgen-debug)."""
    return _arguments(argv).ledger
