"""The Streamlit app under `streamlit.testing.v1.AppTest`: each page renders without exception on an
empty store, on a store with a corrupt run, and on a real checked run; the app imports no data reader
and no TensorFlow."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

import fedgen_debug.app
from fedgen_debug.privacy.accounting import format_epsilon
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
                                           ("Privacy", "No release has been charged"), ("Monitoring", "No monitor")])
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
    assert metrics["ε, all releases"] == format_epsilon(total.guarantee.epsilon)
    assert metrics["budget ε"] == "50" and metrics["budget left"] == format_epsilon(50 - total.guarantee.epsilon)
    assert list(at.dataframe[0].value["release"]) == ["release 0", "release 1", "release 2"]
    chart = at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")
    assert chart, "no ε-over-time chart"
    from fedgen_debug.app.privacy_page import epsilon_over_time

    curve = epsilon_over_time(list(total.releases), total.guarantee.delta)
    assert [p["release"] for p in curve] == [1, 2, 3]
    assert curve[0]["composed ε"] < curve[1]["composed ε"] < curve[2]["composed ε"] == pytest.approx(
        total.guarantee.epsilon)
    # Per run: run0 charged two releases (z = 2 and 2.5 composed), run1 one (z = 3).
    from fedgen_debug.app.privacy_page import epsilon_per_run
    from fedgen_debug.privacy.ledger import composed_guarantee

    releases = list(total.releases)
    moved = [dataclasses.replace(r, source="runs/run0") if r.source == "runs/run2" else r for r in releases]
    rows = {r["run"]: r for r in epsilon_per_run(moved, total.guarantee.delta)}
    assert rows["runs/run0"]["releases"] == 2 and rows["runs/run1"]["releases"] == 1
    assert rows["runs/run0"]["ε composed"] == pytest.approx(
        composed_guarantee([moved[0], moved[2]], total.guarantee.delta).epsilon)
    assert rows["runs/run1"]["ε composed"] == pytest.approx(releases[1].guarantee(total.guarantee.delta).epsilon)
    assert len(at.dataframe) == 2 and list(at.dataframe[1].value["run"]) == ["runs/run0", "runs/run2", "runs/run1"]


def test_per_run_epsilon_groups_an_old_ledgers_relative_and_absolute_sources_of_one_run():
    """Issue 54: an old ledger named a run's training by its absolute path and its other releases by
    the path as typed; the run's id (the release ids' prefix) puts them in one row with the composed ε.
    A relative source with no absolute path of its run stays as written."""
    import dp_accounting

    from fedgen_debug.app.privacy_page import epsilon_per_run
    from fedgen_debug.privacy.ledger import PrivacyRecord, composed_guarantee

    def record(release_id, source, z):
        return PrivacyRecord("synthetic-images:seed=0", 300, "replace-one", (dp_accounting.GaussianDpEvent(z),),
                             release_id, release_id, source=source)

    gan = [record("gan1/training", "/home/me/runs/demo/gan/with_bug-low-accuracy", 0.5),
           record("gan1/t4-quantile-0.5", "runs/demo/gan/with_bug-low-accuracy", 3.0),
           record("gan1/selection-counts", "runs/demo/gan/with_bug-low-accuracy", 4.0)]
    other = record("agg1/examples", "runs/demo/device-aggregates/images", 2.0)
    delta = 1e-5
    rows = {r["run"]: r for r in epsilon_per_run(gan + [other], delta)}
    assert sorted(rows) == ["/home/me/runs/demo/gan/with_bug-low-accuracy", "runs/demo/device-aggregates/images"]
    whole = rows["/home/me/runs/demo/gan/with_bug-low-accuracy"]
    assert whole["releases"] == 3
    assert whole["ε composed"] == pytest.approx(composed_guarantee(gan, delta).epsilon)
    assert rows["runs/demo/device-aggregates/images"]["releases"] == 1


def test_one_run_charged_by_a_relative_and_an_absolute_path_is_one_run_in_the_ledger(tmp_path, monkeypatch,
                                                                                  fresh_ledger):
    """Through `privacy.run_ledger.charge`: two charges of one run directory, one given as a relative path and
    one as an absolute path (through a symlink), name the same source, and the Privacy page's per-run
    table shows one row with both releases composed."""
    from fedgen_debug.app.privacy_page import epsilon_per_run
    from fedgen_debug.privacy import aggregates
    from fedgen_debug.privacy.ledger import composed_guarantee
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.privacy.run_ledger import charge

    monkeypatch.chdir(tmp_path)
    os.makedirs("runs/gan")
    os.symlink(tmp_path / "runs", tmp_path / "linked")
    relative, absolute = os.path.join("runs", "gan", "one"), str(tmp_path / "linked" / "gan" / "one")
    secret, population = RunSecret.fresh(), "synthetic-images:seed=0"
    specs = [aggregates.BoundedSum(f"count {i}", (1.0,), noise_multiplier=2.0) for i in range(2)]
    records = [aggregates.aggregate_record(spec, population, 300, f"{secret.run_id}/{spec.name}", run_dir)
               for spec, run_dir in zip(specs, (relative, absolute))]
    charge(records[0], relative, secret=secret, config_json={"demo-data": {"data": "synthetic-images"}},
           ledger=fresh_ledger)
    charge(records[1], absolute, ledger=fresh_ledger)
    charged = fresh_ledger.records(population)
    assert {r.source for r in charged} == {os.path.realpath(relative)}
    total = fresh_ledger.total(population)
    (row,) = epsilon_per_run(total.releases, total.guarantee.delta)
    assert row["run"] == os.path.realpath(relative) and row["releases"] == 2
    assert row["ε composed"] == pytest.approx(composed_guarantee(charged, total.guarantee.delta).epsilon)


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
    # A run is training: the page says it refreshes, and a refresh shows the rounds done since.
    assert any("refreshes every 5 s" in c.value for c in at.caption)
    assert list(table["rounds"]) == ["1/3", "12/12"] and table["progress"][0] == pytest.approx(1 / 3)
    with open(tmp_path / "gan" / "released" / "status.json", "w") as f:
        json.dump({"state": "running", "rounds_completed": 2, "rounds": 3}, f)
    at.run()
    assert list(at.dataframe[0].value["rounds"]) == ["2/3", "12/12"]
    at.multiselect[0].set_value(["word-LM"]).run()
    assert list(at.dataframe[0].value["run"]) == ["lm"]


def test_runs_table_shows_epsilon_and_the_verdict_among_its_first_columns(tmp_path):
    """Issue 54: at 1400 px the ε and verdict columns were off screen, after data, selector, bug, state,
    rounds and progress; they now follow the run and its kind, and the long data spec comes last."""
    _run(str(tmp_path), "gan", {"gan": {"data": "synthetic-images:writers=100", "select": "by-user-accuracy:low",
                                        "bug_fraction": 0.5}},
         {"state": "finished", "rounds_completed": 3, "rounds": 3}, _privacy(4.0),
         {"pixel_inversion_suspected": True, "inconclusive": False})
    at = _app(tmp_path)
    columns = list(at.dataframe[0].value.columns)
    assert columns[:4] == ["run", "kind", "ε", "verdict"] and columns[-1] == "data"
    assert sorted(columns) == sorted(["run", "kind", "ε", "verdict", "memorization", "bug", "selector", "state",
                                      "rounds", "progress", "δ", "data"])
    assert list(at.dataframe[0].value["verdict"]) == ["inversion suspected"]


def test_memorization_page_shows_a_real_checked_run(tmp_path):
    """A tiny word-LM with update canaries, trained and checked by the CLI: the page shows the verdict,
    the empirical ε and the report's picture."""
    from conftest import provision_secret, run_cli, run_main
    from fedgen_debug.runs import store

    run_dir = str(tmp_path / "word")
    provision_secret(run_dir, "test_app/word")
    assert run_cli("train-lm", "--kind", "word", "--data", "synthetic-text:users=12,seed=8", "--preset", "test",
                   "--vocab-size", "100", "--rounds", "3", "--clients-per-round", "4", "--noise-multiplier", "1",
                   "--update-canaries", "10", "--out", run_dir, timeout=900).returncode == 0
    checked = run_main("check-memorization", run_dir)   # in this process: no second TensorFlow start-up
    passed = store.read_json(store.released(run_dir, store.MEMORIZATION))["verdict"]["passed"]
    assert checked.returncode == (0 if passed else 1), checked.stderr
    at = _app(tmp_path, "Memorization")
    assert at.selectbox[0].value == "word"
    assert len(at.success) + len(at.error) == 1
    labels = [m.label for m in at.metric]
    assert labels[:2] == ["accountant ε", "empirical ε̂"]
    assert len(at.get("imgs")) == 1


def test_the_app_imports_no_data_reader_and_no_tensorflow():
    code = ("import sys, runpy; from streamlit.testing.v1 import AppTest; "
            f"at = AppTest.from_file({APP!r}, default_timeout=60); at.run(); "
            "[at.sidebar.radio[0].set_value(p).run() for p in ('Compare', 'Privacy', 'Memorization', 'Monitoring')]; "
            # The run store's atomic writer lives in data/ (`fedgen_debug.data.atomic`): a file helper,
            # no reader; everything else under data/ reads users' examples.
            "allowed = {'fedgen_debug.data', 'fedgen_debug.data.atomic'}; "
            "bad = [m for m in sys.modules if m.startswith(('tensorflow', 'fedgen_debug.data', "
            "'fedgen_debug.experiments', 'fedgen_debug.device', 'fedgen_debug.training')) and m not in allowed]; print(bad); assert not bad, bad")
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


def test_the_app_command_imports_the_installed_app_even_from_a_checkout():
    """`make app` runs in the repository root, whose fedgen_debug/ has no app/ (setup.cfg maps it in):
    the interpreter Streamlit runs in must not put the current directory first (a real browser showed
    ModuleNotFoundError: fedgen_debug.app before `-P`)."""
    from conftest import REPO_ROOT
    from fedgen_debug.cli.app_cmd import command

    argv = command("runs", 8501)
    flags = argv[:argv.index("-m")]
    code = "import fedgen_debug, fedgen_debug.app; print(fedgen_debug.__file__)"
    result = subprocess.run([*flags, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not result.stdout.strip().startswith(REPO_ROOT + os.sep + "fedgen_debug")
    without = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert without.returncode != 0 and "fedgen_debug.app" in without.stderr  # what -P prevents


def test_the_app_opens_no_file_outside_the_run_store(tmp_path, demo_test_store):
    """Every page, clicked through in a fresh process with an audit hook on `open`, on the demo's store
    (whose data/ holds the simulated users' datasets): the app reads released files and nothing else —
    not the datasets, not a run's server/ side (secret, checkpoints), not the data directory beside it."""
    import shutil

    demo, _ = demo_test_store
    store_root, data_dir = tmp_path / "runs", tmp_path / "data"
    shutil.copytree(demo, store_root)
    _run(str(store_root), "lm", {"lm": {"kind": "word", "data": "synthetic-text:users=30", "bug_fraction": 0.1}},
         {"state": "finished", "rounds_completed": 12, "rounds": 12}, _privacy(3.2),
         memorization={"verdict": {"passed": True, "max_exposure_bits": 12.0, "over_threshold": []},
                       "thakkar": [], "ramaswamy": []})
    data_dir.mkdir()
    (data_dir / "users.jsonl").write_text('{"user": "u1", "text": "private"}\n')
    code = f"""
import os, sys, time
opened = []
sys.addaudithook(lambda event, args: opened.append(os.fspath(args[0])) if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) else None)
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({APP!r}, default_timeout=60); at.run()
for page in ("Runs", "Compare", "Privacy", "Memorization"):
    print("page", page, time.strftime("%H:%M:%S"), file=sys.stderr, flush=True)  # which one, if one times out
    at.sidebar.radio[0].set_value(page).run()
    assert not at.exception, [e.value for e in at.exception]
    if page == "Compare":  # every pair, every snapshot
        for pair in at.selectbox(key="compare_suggestion").options:
            at.selectbox(key="compare_suggestion").set_value(pair).run()
            for option in (at.select_slider(key="compare_round").options if at.select_slider else []):
                at.select_slider(key="compare_round").set_value(option).run()
            assert not at.exception, [e.value for e in at.exception]
paths = [os.path.abspath(p.decode() if isinstance(p, bytes) else p) for p in opened]
released = lambda p: os.sep + "released" + os.sep in p[len({str(store_root)!r}):]
in_store = lambda p: p.startswith({str(store_root)!r})
outside = [p for p in paths if p.startswith({str(tmp_path)!r}) and not (in_store(p) and released(p))]
inside = [p for p in paths if p.startswith({str(store_root)!r})]
assert any("sample_snapshots" in p for p in inside), "no snapshot was read"
assert inside, "the audit hook saw no read of the store"
assert not outside, outside
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "FEDGEN_DEBUG_RUNS": str(store_root)}, cwd="/")
    assert result.returncode == 0, result.stdout + result.stderr


def _privacy_of(run_dir):
    from fedgen_debug.runs import store

    return store.training_release(store.read_json(store.released(str(run_dir), store.PRIVACY)))


def test_runs_page_on_a_store_made_by_the_demo_at_test_size(demo_test_store):
    out, _ = demo_test_store
    at = _app(out, "Runs")
    table = at.dataframe[0].value
    assert sorted(table["run"]) == sorted(
        [f"gan/{p}-{s}-accuracy" for p in ("with_bug", "after_fix") for s in ("low", "high")]
        + [f"lm/{k}-lm-{n}" for k in ("char", "word") for n in ("before", "after")]
        + ["device-aggregates/images", "device-aggregates/text"])
    assert not at.error  # nothing in the demo's store reads as broken
    assert set(table["state"]) == {"finished"} and set(table["progress"]) == {1.0}
    low = table[table["run"] == "gan/with_bug-low-accuracy"].iloc[0]
    assert low["selector"] == "by-user-accuracy:low" and low["bug"] == "invert 50%"
    assert low["ε"].startswith(format_epsilon(_privacy_of(out / 'gan/with_bug-low-accuracy')['epsilon']))


def test_compare_a_gan_pair_from_the_demo_store(demo_test_store):
    """The suggested pair (low vs high accuracy under the bug): the pair's verdict with its z and
    threshold, both runs' ε, two grids of one size with distinct images, quality figures; the round
    slider shows the training snapshots and brightness changes the picture."""
    from fedgen_debug.runs import store

    out, _ = demo_test_store
    at = _app(out, "Compare")
    # The first suggestion is a pair whose analysis found its bug (issue 54: before, the after-fix pair
    # came first by name).
    from fedgen_debug.app.analyses import has_finding, pair_analysis

    first = (at.selectbox(key="compare_left").value, at.selectbox(key="compare_right").value)
    assert has_finding(pair_analysis(str(out), *first)), first
    label = next(o for o in at.selectbox(key="compare_suggestion").options if o.startswith("gan/with_bug-high"))
    at.selectbox(key="compare_suggestion").set_value(label).run()
    assert (at.selectbox(key="compare_left").value, at.selectbox(key="compare_right").value) == (
        "gan/with_bug-high-accuracy", "gan/with_bug-low-accuracy")
    analysis = store.read_json(store.released(str(out / "gan/with_bug-low-accuracy"), store.ANALYSIS))
    verdicts = [e.value for e in (*at.error, *at.success, *at.warning) if "dark background" in e.value]
    assert len(verdicts) == 1 and f"z = {analysis['evidence']['z']:.2f}" in verdicts[0]
    assert any("threshold 3" in c.value for c in at.caption)
    epsilons = [m.value for m in at.metric if m.label == "ε"]
    expected = [_privacy_of(out / f"gan/with_bug-{side}-accuracy")["epsilon"] for side in ("high", "low")]
    assert epsilons == [f"{format_epsilon(e)} ⚠" for e in expected]
    # Beside each ε, what the same noise on the mean update is worth at a deployment (issue 56).
    at_deployment = [c.value for c in at.caption if c.value.startswith("At a deployment: ")]
    assert len(at_deployment) == 2 and all("ε ≤ 1 from N = " in c and "ε ≤ 10 from N = " in c for c in at_deployment)
    assert len([m for m in at.metric if m.label == "Fréchet distance"]) == 2
    # The pair's two grids, then the demo's diagnosis of the pair (issue 55): its evidence and chart.
    final, diagnosis = at.get("imgs")[:2], at.get("imgs")[2:]
    assert final[0].proto.imgs[0].url != final[1].proto.imgs[0].url
    assert [i.proto.imgs[0].caption for i in final] == ["final samples (analyze-gan)"] * 2
    from fedgen_debug.app.diagnosis_view import GAN_CAPTIONS

    assert [i.proto.imgs[0].caption for i in diagnosis] == [GAN_CAPTIONS["a"], GAN_CAPTIONS["b"], "the effects, ranked"]
    assert len(at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")) == 2  # snapshot shares over rounds
    at.select_slider(key="compare_round").set_value(1).run()
    assert [i.proto.imgs[0].caption for i in at.get("imgs")[:2]] == ["after round 1"] * 2
    before = [i.proto.imgs[0].url for i in at.get("imgs")[:2]]
    at.slider(key="compare_brightness").set_value(0.3).run()
    assert not at.exception and [i.proto.imgs[0].url for i in at.get("imgs")[:2]] != before
    # Before vs after the fix: no analysis compared these two, so each shows its own (vs its own partner).
    label = next(o for o in at.selectbox(key="compare_suggestion").options if o.startswith("gan/after_fix-low"))
    at.selectbox(key="compare_suggestion").set_value(label).run()
    assert not [e for e in (*at.error, *at.success) if "dark background" in e.value]
    own = [m.value for m in at.markdown if "from this run's own analysis" in m.value]
    assert len(own) == 2 and sum("dark background" in c.value and "z = " in c.value for c in at.caption) == 2


def test_compare_warns_when_the_primary_model_does_not_fit_the_users(demo_test_store, tmp_path):
    """analyze-gan's check of the T4 thresholds (near chance, crossed) is shown above the pair."""
    import shutil

    from fedgen_debug.runs import store
    from fedgen_debug.analysis import primary_fit

    out, _ = demo_test_store
    for side in ("low", "high"):
        shutil.copytree(out / f"gan/with_bug-{side}-accuracy", tmp_path / f"gan/with_bug-{side}-accuracy",
                        ignore=shutil.ignore_patterns("checkpoints"))
    path = store.released(str(tmp_path / "gan/with_bug-low-accuracy"), store.ANALYSIS)
    analysis = store.read_json(path)
    analysis["primary_fit"] = primary_fit.check({0.25: 0.06, 0.75: 0.04}, 62, "a DP count of the labels present")
    store.write_json(path, analysis)
    at = _app(tmp_path, "Compare")
    shown = [w.value for w in at.warning if "primary model" in w.value or "threshold is not below" in w.value]
    assert len(shown) == 2 and shown[0].startswith("⚠ The primary model is near chance on these users (25% quantile 6.0%")
    assert "chance is 1.6% for 62 classes" in shown[0] and shown[1].startswith("⚠ The low-accuracy threshold is not below")
    analysis["primary_fit"] = primary_fit.check({0.25: 0.6, 0.75: 0.9}, 62, "as given")
    store.write_json(path, analysis)
    assert not [w for w in _app(tmp_path, "Compare").warning if "primary model" in w.value]


def test_compare_char_and_word_lm_pairs_from_the_demo_store(demo_test_store):
    out, _ = demo_test_store
    at = _app(out, "Compare")
    for kind in ("char", "word"):
        label = next(o for o in at.selectbox(key="compare_suggestion").options if o.startswith(f"lm/{kind}-lm-after"))
        at.selectbox(key="compare_suggestion").set_value(label).run()
        assert not at.exception, [e.value for e in at.exception]
        assert len([e for e in (*at.error, *at.success) if "z = " in e.value]) == 1
        assert len([m for m in at.metric if m.label == "ε"]) == 2
        if kind == "char":
            tables = [d.value for d in at.dataframe if list(d.value.columns) == ["word", "space", "probability"]]
            assert len(tables) == 2  # each run's top-k (a glued-candidates table may follow each)
        else:
            assert len(at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")) == 2


def _char_pair(root: str, top: dict) -> None:
    """Two finished char-LM runs, before and after, and after's hand-built analysis with `top` words."""
    for name in ("before", "after"):
        _run(root, name, {"lm": {"kind": "char", "data": "synthetic-text:users=30",
                                 "bug_fraction": 0.1 if name == "after" else 0.0}},
             {"state": "finished", "rounds_completed": 12, "rounds": 12}, _privacy(3.0))
    part = lambda name, mass: {"run_dir": os.path.join(root, name), "kind": "char", "space_mass": mass,  # noqa: E731
                               "top_k": [{"word": w, "probability": p} for w, p in top[name]],
                               "space_top_k": [{"word": w, "probability": p} for w, p in top[name] if " " in w]}
    analysis = {"tokenization_bug_suspected": True, "current": part("after", 0.12), "baseline": part("before", 0.01),
                "evidence": {"statistic": "space_mass", "test": "space mass vs baseline", "z": 7.5, "z_threshold": 3.0}}
    with open(os.path.join(root, "after", "released", "analysis.json"), "w") as f:
        json.dump(analysis, f)


def test_compare_marks_words_with_spaces_and_explains_the_verdict(tmp_path):
    """Hand-built analysis (a trained test-size char-LM rarely samples a glued word): the space column,
    the count under the table, and the verdict sentence with its numbers."""
    _char_pair(str(tmp_path), {"after": [("i have", 0.02), ("ing", 0.01)], "before": [("ing", 0.015)]})
    at = _app(tmp_path, "Compare")
    tables = {len(d.value): d.value for d in at.dataframe if "word" in d.value.columns}
    assert list(tables[2]["word"]) == ["i have", "ing"] and list(tables[2]["space"]) == ["␣", ""]
    assert any("1 of the top 2 contain a space" in c.value for c in at.caption)
    # The glued-token candidates: `after`'s word with a space, in a table of their own (`before` has none).
    (spaced,) = [d.value for d in at.dataframe if "word with a space" in d.value.columns]
    assert list(spaced["word with a space"]) == ["i␣have"] and list(spaced["probability"]) == [0.02]
    assert any(c.value.startswith("the most probable sampled words with a space") for c in at.caption)
    (verdict,) = at.error
    assert verdict.value.startswith(
        "`after`: 12.0% of sampled words contain a space; `before`: 1.0%. z = 7.50 > 3.")
    assert not any(c.value.startswith("⟨U+XXXX⟩") for c in at.caption)


def test_compare_writes_out_top_words_that_print_as_nothing_or_as_other_letters(tmp_path):
    _char_pair(str(tmp_path), {"after": [("\ufeff", 0.03), ("\u0430", 0.02), ("i\u00a0have x", 0.01)],
                               "before": [("ing", 0.015), ("king", 0.01)]})
    at = _app(tmp_path, "Compare")
    tables = {len(d.value): d.value for d in at.dataframe if list(d.value.columns) == ["word", "space", "probability"]}
    assert list(tables[3]["word"]) == ["⟨U+FEFF⟩", "⟨U+0430⟩", "i⟨U+00A0⟩have x"]
    assert list(tables[2]["word"]) == ["ing", "king"]
    (spaced,) = [d.value for d in at.dataframe if "word with a space" in d.value.columns]
    assert list(spaced["word with a space"]) == ["i⟨U+00A0⟩have␣x"]
    assert len([c for c in at.caption if c.value.startswith("⟨U+XXXX⟩")]) == 1   # after's column, not before's


def test_suggested_pairs_put_the_pair_with_a_finding_first():
    """Issue 54: on the demo's store the first suggestion was the after-fix GAN pair (sorted first by
    name); the pair whose analysis suspects the inversion comes first, the rest keep their order."""
    from fedgen_debug.app.catalog import RunSummary
    from fedgen_debug.app.compare_page import suggested_pairs

    runs = [RunSummary(f"gan/{p}-{s}-accuracy", "GAN", "synthetic-images", f"by-user-accuracy:{s}",
                       "invert 50%" if p == "with_bug" else "")
            for p in ("after_fix", "with_bug") for s in ("high", "low")]
    names = lambda pairs: [(runs[i].path, runs[j].path) for i, j, _ in pairs]  # noqa: E731
    today = names(suggested_pairs(runs))
    assert today[0] == ("gan/after_fix-high-accuracy", "gan/after_fix-low-accuracy")
    found = names(suggested_pairs(runs, lambda a, b: {a.path, b.path} == {"gan/with_bug-high-accuracy",
                                                                          "gan/with_bug-low-accuracy"}))
    assert found[0] == ("gan/with_bug-high-accuracy", "gan/with_bug-low-accuracy")
    assert found[1:] == [pair for pair in today if pair != found[0]]


def test_compare_opens_on_the_suggested_pair_whose_analysis_found_the_bug(tmp_path):
    """Two char-LM before/after pairs; only the second (by name) has an analysis that suspects the
    tokenization bug: Compare's first suggestion and the pair it opens are that one, with its verdict."""
    root = str(tmp_path)
    for data in ("a", "b"):
        for name, fraction in (("before", 0.0), ("after", 0.1)):
            _run(root, f"{data}-{name}", {"lm": {"kind": "char", "data": f"synthetic-text:users=30,seed={ord(data)}",
                                                 "bug_fraction": fraction}},
                 {"state": "finished", "rounds_completed": 12, "rounds": 12}, _privacy(3.0))
    part = lambda name, mass: {"run_dir": os.path.join(root, name), "kind": "char", "space_mass": mass,  # noqa: E731
                               "top_k": [{"word": "ing", "probability": 0.01}], "space_top_k": []}
    analysis = {"tokenization_bug_suspected": True, "current": part("b-after", 0.12),
                "baseline": part("b-before", 0.01),
                "evidence": {"statistic": "space_mass", "test": "space mass vs baseline", "z": 7.5, "z_threshold": 3.0}}
    with open(os.path.join(root, "b-after", "released", "analysis.json"), "w") as f:
        json.dump(analysis, f)
    at = _app(tmp_path, "Compare")
    suggestions = at.selectbox(key="compare_suggestion")
    assert suggestions.options[0].startswith("b-after ↔ b-before") and suggestions.value == suggestions.options[0]
    assert suggestions.options[1].startswith("a-after ↔ a-before")
    assert (at.selectbox(key="compare_left").value, at.selectbox(key="compare_right").value) == ("b-after", "b-before")
    (verdict,) = at.error
    assert "z = 7.50 > 3" in verdict.value


# ---- Monitoring, on a store made by a short real monitor run (conftest.monitor_store) ---------------

def test_monitoring_page_shows_signals_thresholds_alerts_and_a_link_to_compare_the_periods(monitor_store):
    root, _, _, _, _ = monitor_store
    at = _app(root, "Monitoring")
    assert at.selectbox(key="monitor_choice").value == "monitor"
    labels = {m.label: m.value for m in at.metric}
    assert labels["periods"] == "5/5"
    # Period 5 (the fix) still alerts or has cleared; the alert history names period 3's rise either way.
    history = at.dataframe[-1].value
    raised = history[history["event"] == "raised"]
    assert list(raised["period"])[0] == 3 and "space_mass" in list(raised["signal"])[0]
    charts = at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")
    assert len(charts) == 3   # the signal (the space mass), the rollout, ε over time
    captions = " ".join(c.value for c in at.caption)
    assert "calibrated on periods 1-2" in captions
    # Periods 4 and 5 started from period 2's model (the char-LM's "last-clean" warm start): said under them.
    assert captions.count("trained on from period 2, the last clean one") == 2, captions
    # Period thumbnails: the char-LM's top OOV words of the last periods (one table each), glued words marked.
    # The alert (active, or the latest one cleared since) is one link away from Compare.
    # (its baseline is period 2, the last before the rise; its other end the period alerting now, or the
    # last one it alerted in)
    assert any("Compare periods 2 and" in m.value for m in at.markdown), [m.value for m in at.markdown]
    tables = [d.value for d in at.dataframe[:-1]]
    assert len(tables) == 5 and any(t["word"].str.contains("␣").any() for t in tables)


def test_an_alert_opens_the_compare_view_of_the_two_periods_it_names(monitor_store, tmp_path):
    import shutil
    from urllib.parse import parse_qs, urlparse

    from fedgen_debug.app.monitoring_page import compare_link
    from fedgen_debug.app.monitors import monitors
    from fedgen_debug.runs import store

    root, _, _, _, _ = monitor_store
    view = monitors(str(root))[0]
    events = [e for e in view.events if e["event"] == "raised"]
    link = compare_link(view, events[0]["alert"])
    query = {k: v[0] for k, v in parse_qs(urlparse(link).query).items()}
    assert query == {"page": "Compare", "left": "monitor/period_002/char-lm", "right": "monitor/period_003/char-lm"}
    at = AppTest.from_file(APP, default_timeout=60)
    os.environ["FEDGEN_DEBUG_RUNS"] = str(root)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.radio[0].value == "Compare"
    assert (at.selectbox(key="compare_left").value, at.selectbox(key="compare_right").value) == \
        (query["left"], query["right"])
    # A corrupt monitor beside it is reported, and the page still works.
    copy = tmp_path / "store"
    shutil.copytree(root / "monitor", copy / "good")
    # An auxiliary that stopped learning in the last period is said so (its signals say little).
    last = store.period_records(str(copy / "good"))[-1]
    last["auxiliaries"]["char-lm"].update(problem="100% of its samples were blank (it had not learned its data)",
                                          start="warm from period 4", next_from_scratch=True)
    store.write_json(store.period_record_path(str(copy / "good"), last["period"]), last)
    at = _app(copy, "Monitoring")
    at.selectbox(key="monitor_choice").set_value("good").run()
    assert any(f"Period {last['period']}: `char-lm`: 100% of its samples were blank" in w.value
               and "the next period trains it from scratch" in w.value for w in at.warning), [w.value for w in at.warning]
    (copy / "bad" / "released").mkdir(parents=True)
    (copy / "bad" / "released" / "monitor.json").write_text("{not json")
    at = _app(copy, "Monitoring")
    at.selectbox(key="monitor_choice").set_value("bad").run()
    assert any("cannot be read" in e.value for e in at.error)


def test_monitoring_page_reads_released_files_only(monitor_store, tmp_path):
    """Clicked through under an audit hook: every file the page opens is in a released/ directory
    (never the monitor's program state, its secret, or a period run's server side)."""
    root, _, _, _, _ = monitor_store
    code = f"""
import os, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(os.fspath(args[0])) if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) else None)
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({APP!r}, default_timeout=60); at.run()
at.sidebar.radio[0].set_value("Monitoring").run()
assert not at.exception, [e.value for e in at.exception]
root = {str(root)!r}
inside = [os.path.abspath(p.decode() if isinstance(p, bytes) else p) for p in opened]
inside = [p for p in inside if p.startswith(root)]
assert any("periods" in p for p in inside), "no period record was read"
outside = [p for p in inside if os.sep + "released" + os.sep not in p[len(root):]]
assert not outside, outside
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "FEDGEN_DEBUG_RUNS": str(root)}, cwd="/")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_link_opens_compare_on_its_pair_even_when_nothing_is_suggested(tmp_path):
    """A monitor's period runs share their selector and carry no bug flag, so Compare suggests no pair;
    the Monitoring page's link must still open the two runs it names (make test-browser found this)."""
    root = str(tmp_path)
    for period in (1, 2, 3):
        _run(root, f"fleet/period_00{period}/gan-random", {"gan": {"data": "synthetic-images:writers=20",
                                                                   "select": "random", "bug_fraction": 0.0}},
             {"state": "finished", "rounds_completed": 2, "rounds": 2}, _privacy(3.0))
    at = AppTest.from_file(APP, default_timeout=60)
    os.environ["FEDGEN_DEBUG_RUNS"] = root
    for key, value in {"page": "Compare", "left": "fleet/period_003/gan-random",
                       "right": "fleet/period_002/gan-random"}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert (at.selectbox(key="compare_left").value, at.selectbox(key="compare_right").value) == \
        ("fleet/period_003/gan-random", "fleet/period_002/gan-random")
