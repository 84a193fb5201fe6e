"""The app's view of the run store: runs found under a root, summarized from released files only, and
broken runs reported without hiding the others."""

import json
import math
import os

from fedgen_debug.app.catalog import catalog, find_runs
from fedgen_debug.privacy.accounting import format_epsilon, format_guarantee


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
    """One rule wherever ε is shown (CLI, logs, app): 4 significant digits, ∞ without noise, – unknown.
    (The app used 3 digits and the CLI 4: the same ε read 12.3 on a page and 12.35 in the terminal.)"""
    assert (format_epsilon(None), format_epsilon(float("inf")), format_epsilon(12.345)) == ("–", "∞", "12.35")
    assert (format_epsilon(9.2223), format_epsilon(58.843), format_epsilon(0.12345), format_epsilon(12345.6),
            format_epsilon(50.0)) == ("9.222", "58.84", "0.1235", "1.235e+04", "50")


def test_a_guarantee_reads_with_the_same_epsilon():
    from fedgen_debug.privacy.accounting import PrivacyGuarantee

    weak = PrivacyGuarantee(12.345, 1e-5, "tight", "replace-one", 8.0)
    assert format_guarantee(weak) == "ε = 12.35 at δ = 1e-05  [WARNING: ε > 10, weak privacy]"
    none = PrivacyGuarantee(float("inf"), 1e-5, "tight", "replace-one", 0.0)
    assert format_guarantee(none).startswith("ε = ∞ at δ = 1e-05")


def test_one_format_epsilon_in_the_source():
    """Issue 54: two functions named format_epsilon (3 and 4 digits); now one, in privacy/accounting.py."""
    import ast

    from conftest import REPO_ROOT

    found = []
    for folder in ("fedgen_debug", "app", "models", "selectors"):
        for root, _, files in os.walk(os.path.join(REPO_ROOT, folder)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    with open(path, encoding="utf-8") as f:
                        tree = ast.parse(f.read())
                    found += [os.path.relpath(path, REPO_ROOT) for node in ast.walk(tree)
                              if isinstance(node, ast.FunctionDef) and node.name == "format_epsilon"]
    assert found == ["fedgen_debug/privacy/accounting.py"]
