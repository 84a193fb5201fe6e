"""The Streamlit app's entry point: `fedgen-debug app --runs DIR` (or `streamlit run` this file with
`-- --runs DIR`). A sidebar chooses the page; every page reads the released run store only. Links can
open a page directly: `?page=Compare&left=RUN&right=RUN` (run paths relative to the store).

Imports stay light (no TensorFlow, no data readers) so the first page is interactive quickly.
"""

from __future__ import annotations

import streamlit as st

from fedgen_debug.app import compare_page, memorization_page, monitoring_page, privacy_page, runs_page
from fedgen_debug.app.settings import runs_root

PAGES = {"Runs": runs_page.render, "Compare": compare_page.render, "Privacy": privacy_page.render,
         "Memorization": memorization_page.render, "Monitoring": monitoring_page.render}


def main() -> None:
    st.set_page_config(page_title="fedgen-debug", layout="wide")
    root = runs_root()
    st.sidebar.title("fedgen-debug")
    st.sidebar.caption(f"run store: `{root}`")
    asked = st.query_params.get("page")
    page = st.sidebar.radio("Page", list(PAGES), index=list(PAGES).index(asked) if asked in PAGES else 0, key="page")
    PAGES[page](root)


main()
