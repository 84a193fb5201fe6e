"""The Streamlit app's entry point: `fedgen-debug app --runs DIR` (or `streamlit run` this file with
`-- --runs DIR`). A sidebar chooses the page; every page reads the released run store only.

Imports stay light (no TensorFlow, no data readers) so the first page is interactive quickly.
"""

from __future__ import annotations

import argparse
import os
import sys

import streamlit as st

from fedgen_debug.app import memorization_page, runs_page

RUNS_ENV = "FEDGEN_DEBUG_RUNS"
PAGES = {"Runs": runs_page.render, "Memorization": memorization_page.render}


def runs_root(argv=None) -> str:
    """`--runs DIR` after the script's `--`, else $FEDGEN_DEBUG_RUNS, else ./runs."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--runs", default=os.environ.get(RUNS_ENV, "runs"))
    known, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    return os.path.abspath(known.runs)


def main() -> None:
    st.set_page_config(page_title="fedgen-debug", layout="wide")
    root = runs_root()
    st.sidebar.title("fedgen-debug")
    st.sidebar.caption(f"run store: `{root}`")
    page = st.sidebar.radio("Page", list(PAGES), key="page")
    PAGES[page](root)


main()
