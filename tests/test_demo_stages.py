"""The demo's stages hand their training runs to the workers they are given: on worker processes every
GAN run is queued before the first analysis (a free worker takes the next), one process trains a phase's
pair, then analyses it, before the next phase. The real runs on real workers: test_cli's demo."""

import concurrent.futures

import pytest

from fedgen_debug.cli import demo_gan


class RecordingPool:
    """Stands in for `SideBySide`: records what is submitted, in order, and finishes nothing by itself."""

    def __init__(self, in_process: bool, events: list):
        self.in_process, self.events = in_process, events

    def submit(self, fn, run, run_dir):
        self.events.append(("train", run_dir.rsplit("/", 1)[-1]))
        future = concurrent.futures.Future()
        future.set_result(None)
        return future


@pytest.fixture
def events(monkeypatch, tmp_path):
    from fedgen_debug.cli import gan_cmd, privacy_flags
    from fedgen_debug.scenarios import gan, gan_report

    recorded = []
    (tmp_path / "primary_cnn.npz").write_bytes(b"")  # the primary CNN exists: not trained here

    def analyze(low, high, samples):
        recorded.append(("analyze", low.rsplit("/", 1)[-1], high.rsplit("/", 1)[-1]))
        side = {"privacy": {"run": {"epsilon": 1.0}}}
        return {"pixel_inversion_suspected": False, "current": side, "compare": side, "inconclusive": False,
                "evidence": {"z": 0.0}, "primary_fit": None}

    monkeypatch.setattr(gan_report, "analyze_gan", analyze)
    monkeypatch.setattr(gan_cmd, "format_report", lambda report: [])
    monkeypatch.setattr(privacy_flags, "privacy_lines", lambda run_dir: [])
    monkeypatch.setattr(gan, "train_public_primary", lambda *args: pytest.fail("the primary CNN exists"))
    return recorded


def _stage(tmp_path, pool):
    return demo_gan.run_gan_stage("synthetic-images:writers=4,seed=0", 0.5, str(tmp_path), 0, "test", workers=pool)


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
