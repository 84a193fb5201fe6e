"""The demo's stages hand their training runs to the workers they are given: on worker processes the LM
runs, then the primary CNN, then every GAN run are queued before the first analysis (a free worker takes
the next); one process trains a phase's pair, then analyses it, before the next phase. The real runs on
real workers: test_cli's demo."""

import concurrent.futures

import pytest

from fedgen_debug.cli import demo_gan, demo_lm


class RecordingPool:
    """Stands in for `SideBySide`: records what is submitted, in order, and finishes nothing by itself."""

    def __init__(self, in_process: bool, events: list):
        self.in_process, self.events = in_process, events

    def submit(self, fn, *args):  # recorded by the run directory (or file) it writes
        self.events.append(("train", next(a for a in args if isinstance(a, str) and "/" in a).rsplit("/", 1)[-1]))
        future = concurrent.futures.Future()
        future.set_result(None)
        return future


@pytest.fixture
def events(monkeypatch, tmp_path):
    from fedgen_debug.cli import gan_cmd, privacy_flags
    from fedgen_debug.scenarios import gan_report

    recorded = []
    (tmp_path / "primary_cnn.npz").write_bytes(b"")  # the primary CNN exists: not queued (the events say)

    def analyze(low, high, samples):
        recorded.append(("analyze", low.rsplit("/", 1)[-1], high.rsplit("/", 1)[-1]))
        side = {"privacy": {"run": {"epsilon": 1.0}}}
        return {"pixel_inversion_suspected": False, "current": side, "compare": side, "inconclusive": False,
                "evidence": {"z": 0.0}, "primary_fit": None}

    monkeypatch.setattr(gan_report, "analyze_gan", analyze)
    monkeypatch.setattr(gan_cmd, "format_report", lambda report: [])
    monkeypatch.setattr(privacy_flags, "privacy_lines", lambda run_dir: [])
    return recorded


def _stage(tmp_path, pool, primary=None):
    return demo_gan.run_gan_stage("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test", pool, primary)


def test_on_workers_every_gan_run_is_queued_before_the_first_analysis(tmp_path, events):
    summary = _stage(tmp_path, RecordingPool(False, events))
    assert events == [("train", "with_bug-low-accuracy"), ("train", "with_bug-high-accuracy"),
                      ("train", "after_fix-low-accuracy"), ("train", "after_fix-high-accuracy"),
                      ("analyze", "with_bug-low-accuracy", "with_bug-high-accuracy"),
                      ("analyze", "after_fix-low-accuracy", "after_fix-high-accuracy")]
    assert set(summary) == {"with_bug", "after_fix"}


def test_in_one_process_a_phase_is_trained_and_analysed_before_the_next(tmp_path, events):
    _stage(tmp_path, RecordingPool(True, events))
    assert events == [("train", "with_bug-low-accuracy"), ("train", "with_bug-high-accuracy"),
                      ("analyze", "with_bug-low-accuracy", "with_bug-high-accuracy"),
                      ("train", "after_fix-low-accuracy"), ("train", "after_fix-high-accuracy"),
                      ("analyze", "after_fix-low-accuracy", "after_fix-high-accuracy")]


def test_the_primary_cnn_is_queued_on_workers_only_when_it_is_missing(tmp_path):
    events = []
    assert demo_gan.queue_primary(str(tmp_path / "gan"), "test", 0, RecordingPool(True, events)) is None
    future = demo_gan.queue_primary(str(tmp_path / "gan"), "test", 0, RecordingPool(False, events))
    assert future is not None and events == [("train", "primary_cnn.npz")]
    (tmp_path / "gan" / "primary_cnn.npz").write_bytes(b"")  # trained (or resumed): nothing to queue
    assert demo_gan.queue_primary(str(tmp_path / "gan"), "test", 0, RecordingPool(False, events)) is None
    assert len(events) == 1


def test_the_lm_runs_are_queued_char_pair_first(tmp_path):
    events = []
    queued = demo_lm.queue_lm_stage("synthetic-text:users=4,seed=0", 0.1, str(tmp_path), 0, "test", 100,
                                    RecordingPool(False, events))
    assert events == [("train", "char-lm-before"), ("train", "char-lm-after"), ("train", "word-lm-before"),
                      ("train", "word-lm-after")]
    assert set(queued["trained"]) == {("char", "before"), ("char", "after"), ("word", "before"), ("word", "after")}


def test_the_stage_trains_a_missing_primary_cnn_first_unless_it_was_queued(tmp_path, events):
    (tmp_path / "primary_cnn.npz").unlink()
    _stage(tmp_path, RecordingPool(True, events))
    assert events[0] == ("train", "primary_cnn.npz") and events[1] == ("train", "with_bug-low-accuracy")
    events.clear()
    queued = concurrent.futures.Future()
    queued.set_result(None)
    _stage(tmp_path, RecordingPool(False, events), primary=queued)  # waited for, not queued again
    assert events[0] == ("train", "with_bug-low-accuracy")


def test_the_gan_runs_are_queued_phase_by_phase_on_workers_and_not_queued_again(tmp_path, events):
    assert demo_gan.queue_gan_runs("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test",
                                   RecordingPool(True, events)) == {}
    queued = demo_gan.queue_gan_runs("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test",
                                     RecordingPool(False, events))
    assert events == [("train", "with_bug-low-accuracy"), ("train", "with_bug-high-accuracy"),
                      ("train", "after_fix-low-accuracy"), ("train", "after_fix-high-accuracy")]
    events.clear()
    demo_gan.run_gan_stage("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test",
                           RecordingPool(False, events), None, queued)
    assert events == [("analyze", "with_bug-low-accuracy", "with_bug-high-accuracy"),
                      ("analyze", "after_fix-low-accuracy", "after_fix-high-accuracy")]


def test_a_gan_run_waits_for_the_primary_cnn_another_process_trains_and_does_not_train_it_again(tmp_path, monkeypatch):
    """The lock of `_train_primary`, held by another process that writes the CNN after 1.5 s."""
    import subprocess
    import sys
    import time

    from fedgen_debug.scenarios import gan

    path = str(tmp_path / "gan" / "primary_cnn.npz")
    trained = []
    monkeypatch.setattr(gan, "train_public_primary", lambda *args: trained.append(args))
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from fedgen_debug.runs import store\n"
        "with store.exclusive(sys.argv[1], wait=True):\n"
        "    print('held', flush=True); time.sleep(1.5); open(sys.argv[1], 'wb').close()\n"), path],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.perf_counter()
    demo_gan._train_primary(path, "test", 0)
    assert time.perf_counter() - started > 0.5 and trained == []   # waited, found it trained
    assert holder.wait(timeout=30) == 0
    demo_gan._train_primary(str(tmp_path / "other" / "primary_cnn.npz"), "test", 0)
    assert len(trained) == 1   # missing and nobody training it: trained here


def test_the_demo_queues_every_run_on_its_workers_before_the_data_stage(tmp_path, monkeypatch):
    """The order the workers take them: the primary CNN, the char-LMs, the longest GAN, the word-LMs, the
    other GANs; then this process's data stage and analyses (each LM pair, then each GAN pair, with all of
    its runs). In one process each stage trains when it comes."""
    import argparse

    from fedgen_debug.cli import demo_cmd, demo_data
    from fedgen_debug.runs import side_by_side

    for processes, expected in ((2, ["train primary_cnn.npz", "train char-lm-before", "train char-lm-after",
                                     "train with_bug-low-accuracy",   # the longest run, early
                                     "train word-lm-before", "train word-lm-after", "train with_bug-high-accuracy",
                                     "train after_fix-low-accuracy", "train after_fix-high-accuracy",
                                     "data", "lm analysis", "gan stage"]),
                                (1, ["data", "train char-lm-before", "train char-lm-after", "train word-lm-before",
                                     "train word-lm-after", "lm analysis", "gan stage"])):
        events = []
        monkeypatch.setattr(side_by_side, "SideBySide", lambda n: _Pool(n == 1, events))
        monkeypatch.setattr(demo_cmd, "settle_budgets", lambda args, stages: [])
        monkeypatch.setattr(demo_data, "run_data_stage", lambda *a: events.append("data") or {})
        monkeypatch.setattr(demo_data, "print_data_stage", lambda summary: None)
        monkeypatch.setattr(demo_lm, "finish_lm_stage", lambda queued: events.append(
            "lm analysis" if len(queued["trained"]) == 4 else "lm runs missing") or {})
        monkeypatch.setattr(demo_gan, "run_gan_stage", lambda *a: events.append(
            "gan stage" if a[-1] is None or len(a[-1]) == 4 else "gan runs missing") or {})
        args = argparse.Namespace(out=str(tmp_path / f"demo{processes}"), writers=4, users=4, seed=0,
                                  concat_fraction=0.1, invert_fraction=0.5, vocab_size=100, preset="test",
                                  parallel_runs=processes, stages="data,lm,gan")
        monkeypatch.setattr(demo_cmd, "planned_records", lambda args, stages: {})   # nothing to report
        demo_cmd.run(args)
        assert [e if isinstance(e, str) else " ".join(e) for e in events] == expected, processes


class _Pool(RecordingPool):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
