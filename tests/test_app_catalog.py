"""The app's view of the run store: runs found under a root, summarized from released files only, and
broken runs reported without hiding the others."""

import json
import math
import os

from fedgen_debug.app.catalog import catalog, find_runs, format_epsilon


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


def _run(root, name, config, status=None, privacy=None, analysis=None, memorization=None):
    released = os.path.join(root, name, "released")
    _write(os.path.join(released, "config.json"), config)
    for file, data in (("status.json", status), ("privacy.json", privacy), ("analysis.json", analysis),
                       ("memorization.json", memorization)):
        if data is not None:
            _write(os.path.join(released, file), data)
    os.makedirs(os.path.join(root, name, "server"), exist_ok=True)


def _privacy(eps):
    return {"releases": {"abc/oov-rate": {"epsilon": 2.0, "delta": 1e-5},
                         "abc/training": {"epsilon": eps, "delta": 1e-5, "above_warning": eps > 10}}}


def test_an_empty_store_has_no_runs(tmp_path):
    assert catalog(str(tmp_path)) == [] and find_runs(str(tmp_path / "missing")) == []


def test_runs_are_summarized_from_released_files_and_broken_ones_reported(tmp_path):
    root = str(tmp_path)
    _run(root, "demo/lm/char-bug", {"lm": {"kind": "char", "data": "synthetic-text:users=300", "bug_fraction": 0.1}},
         {"state": "finished", "rounds_completed": 120, "rounds": 120}, _privacy(float("inf")),
         {"tokenization_bug_suspected": True}, {"verdict": {"passed": False}})
    _run(root, "demo/gan/low", {"gan": {"data": "synthetic-images:writers=100", "select": "by-user-accuracy:low",
                                        "bug_fraction": 0.5}},
         {"state": "running", "rounds_completed": 40, "rounds": 200}, _privacy(8.5),
         {"pixel_inversion_suspected": False, "inconclusive": False})
    _run(root, "demo/gan/corrupt", "{not json")
    _write(os.path.join(root, "demo", "summary.json"), {"rows": []})  # beside runs: not a run
    runs = {r.path: r for r in catalog(root)}
    assert sorted(runs) == ["demo/gan/corrupt", "demo/gan/low", "demo/lm/char-bug"]
    lm = runs["demo/lm/char-bug"]
    assert (lm.kind, lm.bug, lm.progress, lm.verdict, lm.memorization) == (
        "char-LM", "concat 10%", "120/120", "tokenization bug suspected", "FAIL")
    assert math.isinf(lm.epsilon) and lm.above_warning and not lm.broken
    gan = runs["demo/gan/low"]
    assert (gan.kind, gan.selector, gan.state, gan.progress, gan.epsilon, gan.verdict) == (
        "GAN", "by-user-accuracy:low", "running", "40/200", 8.5, "no inversion")
    assert gan.above_warning is False
    assert runs["demo/gan/corrupt"].broken.startswith("JSONDecodeError") and runs["demo/gan/corrupt"].kind == "?"


def test_the_demos_dp_aggregates_are_a_kind_of_run_not_a_broken_one(tmp_path):
    root = str(tmp_path)
    _run(root, "device-aggregates/images",
         {"demo-data": {"data": "synthetic-images:writers=12,seed=0", "kind": "images"}},
         {"state": "finished"}, {"releases": {"a/images: examples": {"epsilon": 0.5, "delta": 1e-5}}})
    _run(root, "device-aggregates/text", {"demo-data": {"data": "synthetic-text:users=40,seed=0", "kind": "text"}},
         {"state": "finished"}, {"releases": {"a/x": {"epsilon": 0.5, "delta": 1e-5}, "a/y": {"epsilon": 1.0}}})
    images, text = catalog(root)
    assert (images.kind, images.data, images.broken, images.epsilon) == (
        "DP aggregates", "synthetic-images:writers=12,seed=0", "", 0.5)
    assert text.kind == "DP aggregates" and text.epsilon is None  # several releases: the Privacy page composes them


def test_epsilon_formatting():
    assert (format_epsilon(None), format_epsilon(float("inf")), format_epsilon(12.345)) == ("–", "∞", "12.3")
