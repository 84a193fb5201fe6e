"""experiments/sweep.py: the one loop that trains the runs of a comparison, analyzes them and collects
rows (issue 54). Real tiny runs: each trains once (a baseline shared by two comparisons too), each
comparison is analysed after its runs trained and in order, a second sweep trains nothing again and
charges nothing twice. On workers, the next comparison is queued before this one is analysed. And no
other module trains runs in a loop: `train_lm(` / `train_gan(` are called from experiments/sweep.py
only, and the GAN round's pieces from training/ only (evaluation/gan_quality.py had its own loop)."""

import ast
import concurrent.futures
import os

import pytest

from conftest import REPO_ROOT
from fedgen_debug.experiments import sweep
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep, run_sweep
from fedgen_debug.privacy.ledger import Ledger
from fedgen_debug.runs import store
from fedgen_debug.training.lm_run import LMRun

DATA = "synthetic-text:users=6,seed=3"


def _run(fraction: float, seed: int) -> LMRun:
    return LMRun("word", DATA, fraction, "test", seed=seed, rounds=2, vocab_size=100)


def _comparisons(root) -> list[Comparison]:
    baseline = Arm("before", str(root / "word-0"), _run(0.0, 0))
    return [Comparison(f"bug {fraction:g}", (baseline, Arm("after", str(root / f"word-{fraction:g}"), _run(fraction, 1))),
                       {"fraction": fraction}) for fraction in (0.5, 1.0)]


def _timing_rows(run_dir: str) -> int:
    return len(store.read_csv(store.server(run_dir, store.TIMING)))


def test_each_run_trains_once_each_comparison_is_analysed_after_its_runs_in_order_and_a_rerun_trains_nothing(
        tmp_path, monkeypatch):
    trained, analysed = [], []
    real_train_run = sweep.train_run

    def spy(run, run_dir, **options):
        result = real_train_run(run, run_dir, **options)
        trained.append((os.path.basename(run_dir), result.rounds_completed, result.resumed_from))
        return result

    monkeypatch.setattr(sweep, "train_run", spy)

    def analyze(comparison):
        for run_dir in comparison.run_dirs.values():   # its runs have finished when it is analysed
            assert store.read_json(store.released(run_dir, store.STATUS))["state"] == "finished"
        analysed.append({name: os.path.basename(d) for name, d in comparison.run_dirs.items()})
        return {"comparison": comparison.name, "fraction": comparison.about["fraction"]}

    rows = run_sweep(_comparisons(tmp_path), analyze)
    assert rows == [{"comparison": "bug 0.5", "fraction": 0.5}, {"comparison": "bug 1", "fraction": 1.0}]
    assert analysed == [{"before": "word-0", "after": "word-0.5"}, {"before": "word-0", "after": "word-1"}]
    # The shared baseline trained once, each run from round 0 to its 2 rounds.
    assert trained == [("word-0", 2, 0), ("word-0.5", 2, 0), ("word-1", 2, 0)]

    dirs = [str(tmp_path / n) for n in ("word-0", "word-0.5", "word-1")]
    rounds_timed = [_timing_rows(d) for d in dirs]
    records = len(Ledger().records())
    trained.clear()
    again = Sweep(_comparisons(tmp_path))
    assert again.collect(analyze) == rows
    # Resumed at their end: no round trained again, nothing charged twice.
    assert trained == [("word-0", 2, 2), ("word-0.5", 2, 2), ("word-1", 2, 2)]
    assert [_timing_rows(d) for d in dirs] == rounds_timed
    assert len(Ledger().records()) == records
    assert again.seconds(again.comparisons[0]) >= 0.0


class RecordingPool:
    """Worker processes stand-in: records what is submitted and when the sweep waits for it."""

    in_process = False

    def __init__(self, events: list):
        self.events = events

    def submit(self, fn, run, run_dir, options):
        assert fn is sweep._train_arm and isinstance(run, LMRun) and options == {}
        name = os.path.basename(run_dir)
        self.events.append(("train", name))
        events = self.events

        class Waited(concurrent.futures.Future):
            def result(self, timeout=None):
                events.append(("wait", name))
                return None

        return Waited()


def test_on_workers_the_next_comparison_is_queued_before_this_one_is_analysed(tmp_path):
    events = []
    comparisons = _comparisons(tmp_path)
    rows = run_sweep(comparisons, lambda c: events.append(("analyze", c.name)) or c.name,
                     workers=RecordingPool(events), ahead=1, announce=lambda c: events.append(("announce", c.name)))
    assert rows == ["bug 0.5", "bug 1"]
    assert events == [("announce", "bug 0.5"), ("train", "word-0"), ("train", "word-0.5"),
                      ("wait", "word-0"), ("wait", "word-0.5"),
                      ("train", "word-1"),                       # the shared baseline is not queued again
                      ("analyze", "bug 0.5"),
                      ("announce", "bug 1"), ("wait", "word-0"), ("wait", "word-1"), ("analyze", "bug 1")]


def test_a_finished_run_without_a_config_is_analysed_as_it_is_and_two_runs_into_one_directory_are_refused(tmp_path):
    events = []
    reference = Arm("reference", str(tmp_path / "elsewhere"))   # no run: nothing to train
    compared = [Comparison("c", (Arm("current", str(tmp_path / "a"), _run(0.5, 1)), reference))]
    run_sweep(compared, lambda c: events.append(("analyze", tuple(c.run_dirs))), workers=RecordingPool(events))
    assert events == [("train", "a"), ("wait", "a"), ("analyze", ("current", "reference"))]

    clash = [Comparison("x", (Arm("a", str(tmp_path / "same"), _run(0.5, 1)),)),
             Comparison("y", (Arm("b", str(tmp_path / "same"), _run(0.5, 2)),))]
    with pytest.raises(ValueError, match="two different runs of the sweep train into this directory"):
        Sweep(clash, RecordingPool([])).queue()
    with pytest.raises(ValueError, match="no run config to train"):
        Arm("r", str(tmp_path / "r"), context={"x": 1})
    with pytest.raises(ValueError, match="arm names must be unique"):
        Comparison("z", (reference, reference))


# ---- One loop: nothing else trains runs --------------------------------------------------------------
TRAIN_FUNCTIONS = {"train_lm", "train_gan"}
# The DP-FedAvg-GAN round's pieces: a module calling them runs GAN rounds of its own.
GAN_ROUND_PIECES = {"client_discriminator_update", "server_generator_update", "GANRounds"}
SCANNED = ("fedgen_debug", "models", "selectors", "app", "evaluation", "benchmarks")


def _called_names(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return names


def loops_elsewhere(root: str) -> list[str]:
    """Every source file (relative to `root`) that calls a train function outside experiments/sweep.py,
    or a GAN round's piece outside training/."""
    found = []
    for top in SCANNED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                called = _called_names(path)
                if called & TRAIN_FUNCTIONS and rel != "fedgen_debug/experiments/sweep.py":
                    found.append(f"{rel}: calls {sorted(called & TRAIN_FUNCTIONS)} (train through experiments.sweep)")
                if called & GAN_ROUND_PIECES and not rel.startswith("fedgen_debug/training/"):
                    found.append(f"{rel}: calls {sorted(called & GAN_ROUND_PIECES)} (a GAN loop of its own)")
    return found


def test_runs_are_trained_through_the_sweep_only():
    found = loops_elsewhere(REPO_ROOT)
    assert not found, "\n".join(found)


def test_the_check_finds_a_loop_of_its_own(tmp_path):
    (tmp_path / "evaluation").mkdir()
    (tmp_path / "evaluation" / "x.py").write_text("for f in (0, 1):\n    lm.train_lm(run, d)\n    analyze_lm(d)\n")
    (tmp_path / "evaluation" / "y.py").write_text("process = tf_backend.GANRounds(g, d, config, secret)\n")
    (tmp_path / "fedgen_debug" / "experiments").mkdir(parents=True)
    (tmp_path / "fedgen_debug" / "experiments" / "sweep.py").write_text("train_gan(run, run_dir)\n")
    assert [f.split(":")[0] for f in loops_elsewhere(str(tmp_path))] == ["evaluation/x.py", "evaluation/y.py"]
