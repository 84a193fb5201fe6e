"""Monitoring alerts carry the diagnosis (issue 55, monitor/diagnosis.py, monitor/runner.py): an alerting
period's auxiliaries are diagnosed against the last calibration period's, the alert says what changed,
an unhealthy auxiliary is reported as such and not as a data change, and a crash between diagnosing and
releasing resumes without diagnosing again."""

import math
import os

import numpy as np
import pytest

from conftest import MONITOR_AUXILIARY as AUX, MONITOR_PLAN, provision_secret
from fedgen_debug.analysis import diagnosis_summary
from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger
from fedgen_debug.runs import store

# The suite's char-LM monitor cut to the two calibration periods and the period whose sentences are all
# glued (the alert), with fewer rounds.
PLAN = {**MONITOR_PLAN, "periods": 3, "rounds_per_period": 8, "rollout": "concat:3=1.0"}


class Crash(RuntimeError):
    pass


@pytest.fixture(scope="module")
def crashed_and_resumed(tmp_path_factory):
    """The monitor crashes in period 3 right after diagnosing it (before anything of the period is
    released), then resumes with the same command; `calls` counts the diagnoses computed in each run."""
    from fedgen_debug.analysis import diagnose
    from fedgen_debug.monitor import runner
    from fedgen_debug.monitor.plan import plan_from_dict

    tmp = tmp_path_factory.mktemp("monitor-diagnosis")
    out, home = tmp / "monitor", tmp / "ledger"
    Ledger(str(home)).set_budget("*", math.inf, reason="monitor diagnosis test")
    provision_secret(str(out), "monitor-diagnosis")
    calls, real_diagnose, real_events = {"crashed": 0, "resumed": 0}, diagnose.diagnose, runner.Monitor._events
    phase = ["crashed"]

    def counted(*args, **kwargs):
        calls[phase[0]] += 1
        return real_diagnose(*args, **kwargs)

    def crash_after_diagnosing(self, active):
        if phase[0] == "crashed" and active.get(3):
            assert self.history.diagnoses[3], "period 3 was not diagnosed before its release"
            raise Crash("killed between the diagnosis and the period's release")
        return real_events(self, active)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LEDGER_ENV, str(home))
        patch.setattr(diagnose, "diagnose", counted)
        patch.setattr(runner.Monitor, "_events", crash_after_diagnosing)
        with pytest.raises(Crash):
            runner.run_monitor(plan_from_dict(PLAN), str(out))
        released_before_resume = [r["period"] for r in store.period_records(str(out))]
        phase[0] = "resumed"
        runner.run_monitor(plan_from_dict(PLAN), str(out))
    return out, calls, released_before_resume


def test_an_alerting_period_carries_the_diagnosis_of_what_changed(crashed_and_resumed):
    out, _, _ = crashed_and_resumed
    records = store.period_records(str(out))
    assert [r["period"] for r in records] == [1, 2, 3]
    assert not any(r.get("diagnoses") or r.get("alerts") for r in records[:2])   # calibration: no alert
    (summary,) = records[2]["diagnoses"].values()
    assert list(records[2]["diagnoses"]) == [AUX]
    # Against the last calibration period, written where `diagnose` writes: the alerting run's released/.
    assert (summary["reference_period"], summary["period"]) == (2, 3)
    assert summary["report"] == f"period_003/{AUX}/released/diagnosis.json"
    report = store.read_json(str(out / summary["report"]))
    assert report["runs"] == {"a": str(out / "period_002" / AUX), "b": str(out / "period_003" / AUX)}
    assert (report["samples"], report["seed"]) == (PLAN["samples"], PLAN["seed"])
    # Every sentence glued: spacing differs first, and the summary is the report's head.
    assert summary["differ"] is True and summary["unhealthy"] == {}
    assert summary["families"] == report["families"][:3] and summary["families"][0] == "spacing"
    assert [t["property"] for t in summary["top"]] == [d["property"] for d in report["differences"][:3]]
    assert all(set(t) >= {"property", "family", "direction", "effect", "z"} for t in summary["top"])
    assert summary["top"][0]["family"] == "spacing" and summary["top"][0]["z"] > 0
    assert summary["evidence"]["chart_png"] == f"period_003/{AUX}/released/diagnosis.png"
    assert len(summary["evidence"]["b"]) == diagnosis_summary.TEXT_EVIDENCE
    assert os.path.exists(out / summary["evidence"]["chart_png"])
    # The alert carries it and says what changed, in the record and in the alerts file (sinks, log).
    (alert,) = records[2]["alerts"]
    assert alert["signal"] == f"{AUX}/space_mass" and alert["diagnosis"] == summary
    assert "Against period 2, the last calibration period: what changed: spacing — " in alert["message"]
    assert diagnosis_summary.UNHEALTHY not in alert["message"]
    (raised,) = [e for e in store.read_jsonl(store.released(str(out), store.ALERTS)) if e["event"] == "raised"]
    assert raised["alert"] == alert and raised["message"] == alert["message"]


def test_a_crash_after_diagnosing_resumes_without_diagnosing_again_and_loses_nothing(crashed_and_resumed):
    out, calls, released_before_resume = crashed_and_resumed
    assert released_before_resume == [1, 2]   # the crash came before period 3's release
    # Diagnosed once, before the crash; the resumed monitor read the released report instead.
    assert calls == {"crashed": 1, "resumed": 0}
    records = store.period_records(str(out))
    summary = records[2]["diagnoses"][AUX]
    report = store.read_json(str(out / summary["report"]))
    assert {k: v for k, v in summary.items() if k not in ("reference_period", "period")} == \
        diagnosis_summary.summarize(report, str(out / summary["report"]), relative_to=str(out))
    events = store.read_jsonl(store.released(str(out), store.ALERTS))
    assert [(e["event"], e["period"]) for e in events] == [("raised", 3)]   # told once, with its diagnosis
    # A report of another pair in the run is not taken for this one.
    from fedgen_debug.monitor.diagnosis import stored_report

    run = str(out / "period_003" / AUX)
    assert stored_report(str(out / "period_002" / AUX), run, PLAN["samples"], PLAN["seed"]) == report
    assert stored_report(str(out / "period_001" / AUX), run, PLAN["samples"], PLAN["seed"]) is None
    assert stored_report(str(out / "period_002" / AUX), run, PLAN["samples"] + 1, PLAN["seed"]) is None


# ---- unhealthy auxiliaries, from hand-built samples and reports --------------------------------------------

def _report(health_b: dict, rows: list[dict], differ: bool) -> dict:
    healthy = {"healthy": True, "shares": {"blank": 0.0, "noise": 0.0, "no_background": 0.0}, "reason": None}
    report = {"schema": "fedgen-debug/diagnosis/2", "kind": "gan", "runs": {"a": "/s/p2/gan", "b": "/s/p5/gan"},
              "samples": 64, "seed": 0, "health": {"a": healthy, "b": health_b},
              "calibration": {"calibrated": True, "against": "training noise of 7 clean replicate pairs",
                              "z_threshold": 3.1},
              "differ": differ, "families": sorted({r["family"] for r in rows if r["significant"]}),
              "differences": rows, "checks": [],
              "evidence": {"a_png": "/s/p5/gan/released/diagnosis_a.png", "b_png": "/s/p5/gan/released/diagnosis_b.png",
                           "chart_png": "/s/p5/gan/released/diagnosis.png"}}
    if not health_b["healthy"]:
        report["unhealthy"] = {"b": health_b["reason"]}
    return report


ROWS = [{"property": "background_level", "family": "polarity", "direction": "darker", "effect": -0.8, "z": -20.0,
         "calibrated_z": -6.5, "significant": True},
        {"property": "ink_share", "family": "polarity", "direction": "more ink", "effect": 0.5, "z": 11.0,
         "calibrated_z": 4.0, "significant": True},
        {"property": "elongation", "family": "orientation", "direction": "wider", "effect": -0.3, "z": -9.0,
         "significant": True},
        {"property": "blur", "family": "sharpness", "direction": "blurrier", "effect": 0.1, "z": 2.0,
         "significant": False}]


@pytest.mark.parametrize("images, reason", [(np.ones((64, 28, 28)), "blank"),
                                             (np.random.default_rng(0).random((64, 28, 28)), "noise")])
def test_an_unhealthy_auxiliary_is_reported_as_unhealthy_not_as_a_data_change(images, reason, tmp_path):
    """Samples that are all paper (blank) or salt-and-pepper noise make the diagnosed side unhealthy
    (`diagnose.image_health`): the summary and the alert say "unhealthy auxiliary", not what changed,
    however large its differences."""
    from fedgen_debug.analysis.diagnose import image_health
    from fedgen_debug.monitor.alerts import Alert
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import Monitor, _History

    from conftest import GAN_MONITOR_PLAN

    health = image_health(images)
    assert not health["healthy"] and reason in health["reason"]
    report = _report(health, ROWS, differ=False)   # diagnose: unhealthy sides never "differ"
    summary = diagnosis_summary.summarize(report, "/s/p5/gan/released/diagnosis.json", relative_to="/s")
    assert summary["unhealthy"] == {"b": health["reason"]} and summary["report"] == "p5/gan/released/diagnosis.json"
    assert summary["evidence"]["b_png"] == "p5/gan/released/diagnosis_b.png"
    line = diagnosis_summary.headline(summary, {"a": "period 2", "b": "period 5"})
    assert line.startswith("unhealthy auxiliary (mostly blank/noise samples) — period 5: mostly ")
    assert reason in line and "no evidence of a data change" in line
    assert "what changed" not in line and "background_level" not in line

    monitor = Monitor(plan_from_dict(GAN_MONITOR_PLAN), str(tmp_path / "monitor"))
    monitor.history = _History()
    monitor.history.diagnoses = {5: {"gan-random": {**summary, "reference_period": 2, "period": 5}}}
    alert = monitor._alert_json(Alert("gan-random/frechet_drift", 5, 5, 67.2, 40.0, "calibrated", (4, 5)))
    assert alert["diagnosis"]["unhealthy"] == {"b": health["reason"]}
    assert alert["message"].startswith(Alert("gan-random/frechet_drift", 5, 5, 67.2, 40.0, "calibrated",
                                             (4, 5)).describe())
    assert "Against period 2, the last calibration period: unhealthy auxiliary (mostly blank/noise samples)" \
        in alert["message"]
    assert "what changed" not in alert["message"]
    # Another period's diagnosis is not this alert's.
    other = monitor._alert_json(Alert("gan-random/frechet_drift", 6, 6, 67.2, 40.0, "calibrated", (5, 6)))
    assert "diagnosis" not in other


def test_a_healthy_change_reads_what_changed_with_the_calibrated_z_first():
    healthy = {"healthy": True, "shares": {"blank": 0.0, "noise": 0.0, "no_background": 0.0}, "reason": None}
    summary = diagnosis_summary.summarize(_report(healthy, ROWS, differ=True), "/s/p5/gan/released/diagnosis.json")
    assert summary["families"] == ["orientation", "polarity"] and summary["unhealthy"] == {}
    # The calibrated z (against training noise) when the report has one, else the sampling-noise z.
    assert [(t["property"], t["z"], t["z_against"]) for t in summary["top"]] == [
        ("background_level", -6.5, "training noise"), ("ink_share", 4.0, "training noise"),
        ("elongation", -9.0, "sampling noise")]
    assert diagnosis_summary.headline(summary) == ("what changed: polarity — background_level darker, ink_share "
                                                   "more ink; orientation — elongation wider")
    quiet = diagnosis_summary.summarize(_report(healthy, [dict(ROWS[3])], differ=False), "/d.json")
    assert diagnosis_summary.headline(quiet) == ("what changed: nothing beyond the training noise of 7 clean "
                                                 "replicate pairs (largest: blur blurrier)")
    # A schema-1 report (no calibration fields) and a plan with too few samples to diagnose.
    old = {k: v for k, v in _report(healthy, [{k: v for k, v in ROWS[0].items() if k != "calibrated_z"}],
                                    differ=True).items()}
    assert diagnosis_summary.summarize(old, "/d.json")["top"][0]["z"] == -20.0
    from fedgen_debug.monitor.diagnosis import diagnose_run

    unavailable = diagnose_run("/a", "/b", 10, 0, "/")
    assert diagnosis_summary.headline(unavailable).startswith("no diagnosis: the plan draws 10 samples")
