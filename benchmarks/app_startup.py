"""Benchmark: how long until the app's first page is interactive, on a store of 50 runs, in a real
browser (Debian's Chromium, as `make test-browser`), against a bare Streamlit page measured in the same
run. Target (issue 13): under 5 s on 2 cores. Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/app_startup.py --store runs/demo [--runs 50] [--repeats 3]

The store is made by copying the `released/` side of the given store's runs until there are --runs of
them (the app reads nothing else). Interactive = the process was started, Streamlit answered its
health check, the browser loaded the page and the script finished with the run table drawn
(`[data-testid="stApp"][data-test-script-state="notRunning"]` and a `stDataFrame`). The browser is
started before the clock, as a user's already is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BARE = "import streamlit as st\nst.title('hello')\nst.dataframe({'a': [1, 2, 3]})\n"


def build_store(source: str, target: str, runs: int) -> int:
    """Copies the released side of the runs under `source` round-robin until `target` holds `runs` runs."""
    from fedgen_debug.app.catalog import find_runs

    found = [r for r in find_runs(source)]
    if not found:
        raise SystemExit(f"{source} holds no runs: run `make demo` first, or pass --store.")
    for i in range(runs):
        relative = found[i % len(found)]
        shutil.copytree(os.path.join(source, relative, "released"),
                        os.path.join(target, f"copy{i // len(found):02d}", relative, "released"))
    return len(found)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_to_interactive(driver, argv_for_port, done_selector: str) -> float:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port = _free_port()
    started = time.perf_counter()
    process = subprocess.Popen(argv_for_port(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                if time.perf_counter() - started > 120:
                    raise SystemExit("no health check answer within 120 s")
                time.sleep(0.05)
        driver.get(url)
        WebDriverWait(driver, 120, poll_frequency=0.05).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stApp"][data-test-script-state="notRunning"]')
            and d.find_elements(By.CSS_SELECTOR, done_selector))
        return time.perf_counter() - started
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        driver.get("about:blank")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", default="runs/demo")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from test_app_browser import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS

    work = tempfile.mkdtemp(prefix="app-startup-")
    distinct = build_store(os.path.abspath(args.store), os.path.join(work, "store"), args.runs)
    bare = os.path.join(work, "bare.py")
    with open(bare, "w") as f:
        f.write(BARE)
    cli = os.path.join(os.path.dirname(sys.executable), "fedgen-debug")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        rows = []
        for _ in range(args.repeats):
            base = time_to_interactive(driver, lambda p: [sys.executable, "-P", "-m", "streamlit", "run", bare,
                                                          "--server.headless", "true", "--server.port", str(p),
                                                          "--browser.gatherUsageStats", "false"],
                                       '[data-testid="stDataFrame"]')
            app = time_to_interactive(driver, lambda p: [cli, "app", "--runs", os.path.join(work, "store"),
                                                         "--port", str(p)], '[data-testid="stDataFrame"]')
            rows.append((base, app))
    finally:
        driver.quit()
        shutil.rmtree(work, ignore_errors=True)
    print(f"store: {args.runs} runs (copies of {distinct} runs of {args.store}); {os.cpu_count()} cores; "
          f"{args.repeats} repeats, seconds from process start to an interactive first page")
    print(f"{'repeat':>6} {'bare Streamlit':>15} {'fedgen-debug app':>17} {'ratio':>6}")
    for i, (base, app) in enumerate(rows, 1):
        print(f"{i:>6} {base:>15.2f} {app:>17.2f} {app / base:>6.2f}")
    base, app = statistics.median(b for b, _ in rows), statistics.median(a for _, a in rows)
    print(f"{'median':>6} {base:>15.2f} {app:>17.2f} {app / base:>6.2f}   (target: app < 5 s)")


if __name__ == "__main__":
    main()
