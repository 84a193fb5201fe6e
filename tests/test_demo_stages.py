"""The demo's stages hand their training runs to the workers they are given: on worker processes the LM
runs, then the primary CNN are queued (a free worker takes the next), then the GANs a phase's pair at a
time, the next pair queued once this one has trained and before it is analysed (its named check, then its
diagnosis on that check's report); one process trains a phase's pair, then analyses it, before the next phase. The real runs on real workers: test_cli's demo."""

import concurrent.futures

import pytest

from fedgen_debug.cli import demo_gan, demo_lm


class WaitedFor(concurrent.futures.Future):
    """A finished call's future that records when the stage waits for it."""

    def __init__(self, events: list, name: str):
        super().__init__()
        self.events, self.name = events, name
        self.set_result(None)

    def result(self, timeout=None):
        self.events.append(("wait", self.name))
        return super().result(timeout)


class RecordingPool:
    """Stands in for `SideBySide`: records what is submitted, in order (and, with `waits`, when the stage
    waits for a call), and finishes nothing by itself."""

    def __init__(self, in_process: bool, events: list, waits: bool = False):
        self.in_process, self.events, self.waits = in_process, events, waits

    def submit(self, fn, *args):  # recorded by the run directory (or file) it writes
        name = next(a for a in args if isinstance(a, str) and "/" in a).rsplit("/", 1)[-1]
        self.events.append(("train", name))
        if self.waits:
            return WaitedFor(self.events, name)
        future = concurrent.futures.Future()
        future.set_result(None)
        return future


@pytest.fixture
def events(monkeypatch, tmp_path):
    from fedgen_debug.cli import diagnose_cmd, gan_cmd, privacy_flags
    from fedgen_debug.analysis import diagnose, gan_report

    recorded = []
    (tmp_path / "primary_cnn.npz").write_bytes(b"")  # the primary CNN exists: not queued (the events say)

    def analyze(low, high, samples):
        recorded.append(("analyze", low.rsplit("/", 1)[-1], high.rsplit("/", 1)[-1]))
        side = {"privacy": {"run": {"epsilon": 1.0}}}
        return {"pixel_inversion_suspected": False, "current": side, "compare": side, "inconclusive": False,
                "evidence": {"z": 0.0}, "primary_fit": None}

    def diagnosed(run_a, run_b, samples, named_report):  # on the named check's report, not analysed again
        assert named_report["evidence"] == {"z": 0.0}
        recorded.append(("diagnose", run_b.rsplit("/", 1)[-1], run_a.rsplit("/", 1)[-1]))
        return {}

    monkeypatch.setattr(gan_report, "analyze_gan", analyze)
    monkeypatch.setattr(diagnose, "diagnose", diagnosed)
    monkeypatch.setattr(diagnose_cmd, "brief", lambda report: {})
    monkeypatch.setattr(diagnose_cmd, "brief_lines", lambda summary, pair: [])
    monkeypatch.setattr(gan_cmd, "format_report", lambda report: [])
    monkeypatch.setattr(privacy_flags, "privacy_lines", lambda run_dir: [])
    return recorded


def _stage(tmp_path, pool, primary=None):
    return demo_gan.run_gan_stage("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test", pool, primary)


def test_on_workers_the_next_pair_is_queued_once_a_pair_has_trained_and_trains_during_its_analysis(
        tmp_path, events):
    summary = _stage(tmp_path, RecordingPool(False, events, waits=True))
    assert events == [("train", "with_bug-low-accuracy"), ("train", "with_bug-high-accuracy"),
                      ("wait", "with_bug-low-accuracy"), ("wait", "with_bug-high-accuracy"),
                      ("train", "after_fix-low-accuracy"), ("train", "after_fix-high-accuracy"),
                      ("analyze", "with_bug-low-accuracy", "with_bug-high-accuracy"),
                      ("diagnose", "with_bug-low-accuracy", "with_bug-high-accuracy"),
                      ("wait", "after_fix-low-accuracy"), ("wait", "after_fix-high-accuracy"),
                      ("analyze", "after_fix-low-accuracy", "after_fix-high-accuracy"),
                      ("diagnose", "after_fix-low-accuracy", "after_fix-high-accuracy")]
    assert set(summary) == {"with_bug", "after_fix"}


def test_in_one_process_a_phase_is_trained_and_analysed_before_the_next(tmp_path, events):
    _stage(tmp_path, RecordingPool(True, events))
    assert events == [("train", "with_bug-low-accuracy"), ("train", "with_bug-high-accuracy"),
                      ("analyze", "with_bug-low-accuracy", "with_bug-high-accuracy"),
                      ("diagnose", "with_bug-low-accuracy", "with_bug-high-accuracy"),
                      ("train", "after_fix-low-accuracy"), ("train", "after_fix-high-accuracy"),
                      ("analyze", "after_fix-low-accuracy", "after_fix-high-accuracy"),
                      ("diagnose", "after_fix-low-accuracy", "after_fix-high-accuracy")]


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
    assert [(c.name, tuple(c.run_dirs)) for c in queued.comparisons] == [("char", ("before", "after")),
                                                                          ("word", ("before", "after"))]


def test_the_stage_trains_a_missing_primary_cnn_first_unless_it_was_queued(tmp_path, events):
    (tmp_path / "primary_cnn.npz").unlink()
    _stage(tmp_path, RecordingPool(True, events))
    assert events[0] == ("train", "primary_cnn.npz") and events[1] == ("train", "with_bug-low-accuracy")
    events.clear()
    queued = concurrent.futures.Future()
    queued.set_result(None)
    _stage(tmp_path, RecordingPool(False, events), primary=queued)  # waited for, not queued again
    assert events[0] == ("train", "with_bug-low-accuracy")


def test_the_demo_gans_train_150_rounds_unless_told_and_the_privacy_plan_counts_the_rounds_they_train(tmp_path):
    import argparse

    from fedgen_debug.cli import demo_cmd
    from fedgen_debug.privacy.ledger import composed_guarantee

    parser = argparse.ArgumentParser()
    demo_cmd.register(parser.add_subparsers())

    def args(*flags):
        return parser.parse_args(["demo", "--out", str(tmp_path), *flags])

    assert demo_cmd.gan_rounds(args()) == demo_gan.DEMO_GAN_ROUNDS == 150
    assert demo_cmd.gan_rounds(args("--gan-rounds", "200")) == 200
    assert demo_cmd.gan_rounds(args("--preset", "test")) is None  # the test preset's own
    runs = demo_gan.stage_runs("synthetic-images:writers=100,seed=0", 0.5, str(tmp_path), 0, "demo", 150)
    assert {run.training_config(100).training.rounds for run, _ in runs.values()} == {150}
    assert {run.training_config(100).training.rounds
            for run, _ in demo_gan.stage_runs("synthetic-images:writers=100,seed=0", 0.5, str(tmp_path), 0,
                                              "demo").values()} == {200}

    def gan_epsilon(*flags):
        (records,) = demo_cmd.planned_records(args(*flags), ["gan"]).values()
        return composed_guarantee(records, 1e-4).epsilon

    assert gan_epsilon() < gan_epsilon("--gan-rounds", "200")


def test_the_stage_says_how_many_rounds_its_gans_train_and_when_that_is_not_the_presets(tmp_path, events, capsys):
    pool = RecordingPool(in_process=True, events=events)
    demo_gan.run_gan_stage("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test", pool, rounds=2)
    assert "2 rounds each (the test preset's, train-gan's default: 3)" in capsys.readouterr().out
    demo_gan.run_gan_stage("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test", pool)
    out = capsys.readouterr().out
    assert "3 rounds each;" in out and "default" not in out
