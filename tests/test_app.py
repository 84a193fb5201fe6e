"""The Streamlit app under `streamlit.testing.v1.AppTest`: each page renders without exception on an
empty store, on a store with a corrupt run, and on a real checked run; the app imports no data reader
and no TensorFlow."""

import os
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

import fedgen_debug.app
from test_app_catalog import _privacy, _run

APP = os.path.join(list(fedgen_debug.app.__path__)[0], "main.py")


def _app(root, page="Runs"):
    at = AppTest.from_file(APP, default_timeout=60)
    os.environ["FEDGEN_DEBUG_RUNS"] = str(root)
    at.run()
    if page != "Runs":
        at.sidebar.radio[0].set_value(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(autouse=True)
def _restore_env():
    before = os.environ.get("FEDGEN_DEBUG_RUNS")
    yield
    if before is None:
        os.environ.pop("FEDGEN_DEBUG_RUNS", None)
    else:
        os.environ["FEDGEN_DEBUG_RUNS"] = before


@pytest.mark.parametrize("page, message", [("Runs", "No runs yet"), ("Memorization", "No run"), ("Compare", "needs two"),
                                           ("Privacy", "No release has been charged")])
def test_every_page_handles_an_empty_store(tmp_path, monkeypatch, page, message):
    monkeypatch.setenv("FEDGEN_DEBUG_LEDGER", str(tmp_path / "empty-ledger"))
    at = _app(tmp_path, page)
    assert any(message in i.value for i in at.info), [i.value for i in at.info]


def test_privacy_page_composes_the_ledger_over_time(tmp_path, monkeypatch):
    import dp_accounting

    from fedgen_debug.privacy.ledger import Ledger, PrivacyRecord

    home = tmp_path / "ledger"
    monkeypatch.setenv("FEDGEN_DEBUG_LEDGER", str(home))
    ledger = Ledger(str(home))
    ledger.set_budget("*", 50.0)
    for i, z in enumerate((2.0, 3.0, 2.5)):
        ledger.spend([PrivacyRecord("synthetic-text:seed=0", 300, "replace-one", (dp_accounting.GaussianDpEvent(z),),
                                    f"release {i}", f"run{i}/training", source=f"runs/run{i}")])
    total = ledger.total("synthetic-text:seed=0")
    at = _app(tmp_path, "Privacy")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["ε, all releases"] == f"{total.guarantee.epsilon:.3g}"
    assert metrics["budget ε"] == "50" and metrics["budget left"] == f"{50 - total.guarantee.epsilon:.3g}"
    assert list(at.dataframe[0].value["release"]) == ["release 0", "release 1", "release 2"]
    chart = at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")
    assert chart, "no ε-over-time chart"
    from fedgen_debug.app.privacy_page import epsilon_over_time

    curve = epsilon_over_time(list(total.releases), total.guarantee.delta)
    assert [p["release"] for p in curve] == [1, 2, 3]
    assert curve[0]["composed ε"] < curve[1]["composed ε"] < curve[2]["composed ε"] == pytest.approx(
        total.guarantee.epsilon)


def test_runs_page_lists_runs_and_reports_a_corrupt_one(tmp_path):
    _run(str(tmp_path), "lm", {"lm": {"kind": "word", "data": "synthetic-text:users=30", "bug_fraction": 0.1}},
         {"state": "finished", "rounds_completed": 12, "rounds": 12}, _privacy(3.2),
         {"tokenization_bug_suspected": False})
    _run(str(tmp_path), "gan", {"gan": {"data": "synthetic-images:writers=10", "select": "random"}},
         {"state": "running", "rounds_completed": 1, "rounds": 3}, _privacy(55.0))
    _run(str(tmp_path), "half", "{")
    at = _app(tmp_path)
    table = at.dataframe[0].value
    assert list(table["run"]) == ["gan", "lm"] and list(table["ε"]) == ["55 ⚠", "3.2"]
    assert list(table["verdict"]) == ["–", "no tokenization bug"]
    assert any("`half` cannot be read" in e.value for e in at.error)
    assert any("weak privacy" in w.value for w in at.warning)
    at.multiselect[0].set_value(["word-LM"]).run()
    assert list(at.dataframe[0].value["run"]) == ["lm"]


def test_memorization_page_shows_a_real_checked_run(tmp_path):
    """A tiny word-LM with update canaries, trained and checked by the CLI: the page shows the verdict,
    the empirical ε and the report's picture."""
    from conftest import provision_secret, run_cli

    run_dir = str(tmp_path / "word")
    provision_secret(run_dir, "test_app/word")
    assert run_cli("train-lm", "--kind", "word", "--data", "synthetic-text:users=12,seed=8", "--preset", "test",
                   "--vocab-size", "100", "--rounds", "3", "--clients-per-round", "4", "--noise-multiplier", "1",
                   "--update-canaries", "10", "--out", run_dir, timeout=900).returncode == 0
    assert run_cli("check-memorization", run_dir, timeout=600).returncode in (0, 1)
    at = _app(tmp_path, "Memorization")
    assert at.selectbox[0].value == "word"
    assert len(at.success) + len(at.error) == 1
    labels = [m.label for m in at.metric]
    assert labels[:2] == ["accountant ε", "empirical ε̂"]
    assert len(at.get("imgs")) == 1


def test_the_app_imports_no_data_reader_and_no_tensorflow():
    code = ("import sys, runpy; from streamlit.testing.v1 import AppTest; "
            f"at = AppTest.from_file({APP!r}); at.run(); "
            "[at.sidebar.radio[0].set_value(p).run() for p in ('Compare', 'Privacy', 'Memorization')]; "
            # The run store's atomic writer lives in data/ (`fedgen_debug.data.atomic`): a file helper,
            # no reader; everything else under data/ reads users' examples.
            "allowed = {'fedgen_debug.data', 'fedgen_debug.data.atomic'}; "
            "bad = [m for m in sys.modules if m.startswith(('tensorflow', 'fedgen_debug.data', "
            "'fedgen_debug.scenarios', 'fedgen_debug.training')) and m not in allowed]; print(bad); assert not bad, bad")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "FEDGEN_DEBUG_RUNS": "/nonexistent"}, cwd="/")
    assert result.returncode == 0, result.stdout + result.stderr


def test_fedgen_debug_app_serves_the_app_headless(tmp_path):
    import socket
    import time
    import urllib.request

    from conftest import fedgen_cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([fedgen_cli(), "app", "--runs", str(tmp_path), "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline, healthy = time.time() + 60, False
        while time.time() < deadline and not healthy:
            try:
                healthy = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok"
            except OSError:
                time.sleep(0.5)
        assert healthy, "the app did not answer its health check within 60 s"
    finally:
        os.killpg(process.pid, 15)
        output = process.communicate(timeout=30)[0]
    assert f"http://localhost:{port}" in output


def test_the_app_opens_no_file_outside_the_run_store(tmp_path):
    """Every page, clicked through in a fresh process with an audit hook on `open`: the app reads the
    store's files and nothing in the data directory beside it (the users' examples in a real setup)."""
    store_root, data_dir = tmp_path / "runs", tmp_path / "data"
    _run(str(store_root), "lm", {"lm": {"kind": "word", "data": "synthetic-text:users=30", "bug_fraction": 0.1}},
         {"state": "finished", "rounds_completed": 12, "rounds": 12}, _privacy(3.2),
         memorization={"verdict": {"passed": True, "max_exposure_bits": 12.0, "over_threshold": []},
                       "thakkar": [], "ramaswamy": []})
    data_dir.mkdir()
    (data_dir / "users.jsonl").write_text('{"user": "u1", "text": "private"}\n')
    code = f"""
import os, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(os.fspath(args[0])) if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) else None)
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({APP!r}, default_timeout=60); at.run()
for page in ("Runs", "Compare", "Privacy", "Memorization"):
    at.sidebar.radio[0].set_value(page).run()
    assert not at.exception, [e.value for e in at.exception]
paths = [os.path.abspath(p.decode() if isinstance(p, bytes) else p) for p in opened]
outside = [p for p in paths if p.startswith({str(tmp_path)!r}) and not p.startswith({str(store_root)!r})]
inside = [p for p in paths if p.startswith({str(store_root)!r})]
assert inside, "the audit hook saw no read of the store"
assert not outside, outside
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "FEDGEN_DEBUG_RUNS": str(store_root)}, cwd="/")
    assert result.returncode == 0, result.stdout + result.stderr


def _png(path, value):
    import numpy as np
    from PIL import Image

    Image.fromarray(np.full((8, 8), value, np.uint8)).save(path)


def test_compare_shows_two_gan_grids_and_two_char_lm_tables_with_verdicts_and_epsilon(tmp_path):
    root = str(tmp_path)
    for name, bug, eps, dark in (("gan-bug", 0.5, 8.8, True), ("gan-fixed", 0.0, 9.1, False)):
        _run(root, name, {"gan": {"data": "synthetic-images:writers=10", "select": "by-user-accuracy:low",
                                  "bug_fraction": bug}}, {"state": "finished", "rounds_completed": 3, "rounds": 3},
             _privacy(eps), {"pixel_inversion_suspected": dark, "inconclusive": False})
        _png(os.path.join(root, name, "released", "samples.png"), 0 if dark else 255)
    at = _app(tmp_path, "Compare")
    assert [s.value for s in at.selectbox] == ["gan-bug", "gan-fixed"]  # the suggested pair
    images = at.get("imgs")
    assert len(images) == 2
    urls = [img.proto.imgs[0].url for img in images]
    assert urls[0] != urls[1]
    assert [m.value for m in at.metric] == ["8.8", "9.1"]
    text = " ".join(m.value for m in at.markdown)
    assert "inversion suspected" in text and "no inversion" in text

    root2 = tmp_path / "lm"
    for name, words in (("char-bug", [("i have", 0.02), ("ing", 0.01)]), ("char-clean", [("ing", 0.015)])):
        _run(str(root2), name, {"lm": {"kind": "char", "data": "synthetic-text:users=30", "bug_fraction": 0.1}},
             {"state": "finished", "rounds_completed": 12, "rounds": 12}, _privacy(3.0),
             {"tokenization_bug_suspected": name == "char-bug"})
        with open(os.path.join(root2, name, "released", "top_oov_words.csv"), "w") as f:
            f.write("word,probability,sampled\n" + "".join(f"{w},{p},5\n" for w, p in words))
    at = _app(root2, "Compare")
    tables = [d.value for d in at.dataframe]
    assert len(tables) == 2 and list(tables[0]["word"]) == ["i have", "ing"] and list(tables[0]["space"]) == ["␣", ""]
    assert any("1 of the top 2 contain a space" in c.value for c in at.caption)
