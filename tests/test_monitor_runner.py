"""`fedgen-debug monitor` end to end on tiny real runs (monitor/runner.py): periods warm-started on a
changing fleet, signals, calibrated thresholds and alerts, privacy composed over time; a kill -9 in the
middle of a period resumes to exactly what an uninterrupted monitor computes and spends nothing twice;
a plan over budget is refused up front, a period over budget before it runs."""

import json
import math
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import GAN_MONITOR_PLAN as GAN_PLAN, MONITOR_AUXILIARY as AUX, MONITOR_PLAN, eventually, fedgen_cli, \
    ledger_with_unlimited_budget as _ledger, monitor as _monitor, provision_secret, run_main
from fedgen_debug import runtime
from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger
from fedgen_debug.runs import store

def test_a_monitor_runs_every_period_warm_started_and_releases_its_records(monitor_store, monkeypatch):
    _, out, _, stdout, _ = monitor_store
    records = store.period_records(str(out))
    assert [r["period"] for r in records] == [1, 2, 3, 4, 5]
    assert [r["rollout"]["fraction"] for r in records] == [0, 0, 1.0, 1.0, 0]
    # A char-LM warm-starts from the last period within every threshold ("last-clean"): periods 3 and 4
    # (every sentence glued) are past the space mass's, so 4 and 5 start from period 2's model.
    warm = [store.read_config(str(out / f"period_{r['period']:03d}" / AUX))["monitor"]["warm_start_from"]
            for r in records]
    assert warm == [None, f"period_001/{AUX}", f"period_002/{AUX}", f"period_002/{AUX}", f"period_002/{AUX}"]
    assert records[4]["auxiliaries"][AUX]["start"] == "warm from period 2, its last within every threshold"
    for r in records:
        config = store.read_config(str(out / f"period_{r['period']:03d}" / AUX))
        assert config["lm"]["bug_fraction"] == r["rollout"]["fraction"]   # the period's share of glued sentences
        assert set(r["auxiliaries"][AUX]["signals"]) == {"space_mass"}
    # ε composes over the periods in the ledger: it grows every period.
    epsilons = [r["population_epsilon"] for r in records]
    assert all(b > a for a, b in zip(epsilons, epsilons[1:]))
    meta = store.read_json(store.released(str(out), store.MONITOR))
    assert meta["state"] == "finished" and meta["periods_completed"] == 5
    assert set(meta["thresholds"]) == {f"{AUX}/space_mass"}
    assert "period   5" in stdout
    # --check on the finished monitor counts its periods as done (it forecast 5 more, as if none had run).
    tmp, _, ledger, _, _ = monitor_store
    monkeypatch.setenv(LEDGER_ENV, ledger)   # through the console script's main() in this process
    check = run_main("monitor", "--plan", tmp / "monitor.plan.json", "--out", out, "--check")
    assert check.returncode == 0, check.stderr
    assert "affords 5 period(s) of this plan; the plan has 5, 5 done in" in check.stdout
    assert "ε after each further period: none (every period is done)" in check.stdout


def test_the_rollout_raises_an_alert_that_names_what_to_compare_and_reaches_every_sink(monitor_store):
    _, out, _, _, sink = monitor_store
    records = store.period_records(str(out))
    meta = store.read_json(store.released(str(out), store.MONITOR))
    for name, threshold in meta["thresholds"].items():
        signal = name.split("/")[1]
        clean = [r["auxiliaries"][AUX]["signals"][signal] for r in records[:2]]
        assert threshold["value"] >= np.mean(clean) + 4 * np.std(clean, ddof=1) - 1e-12
        assert "calibrated on periods 1-2" in threshold["source"]
    # Glued words carry spaces: the space mass leaves its clean range in the rollout's first period.
    space = [r["auxiliaries"][AUX]["signals"]["space_mass"] for r in records]
    assert space[2] > meta["thresholds"][f"{AUX}/space_mass"]["value"] > max(space[:2]), space
    assert [a["signal"] for a in records[2]["alerts"]] == [f"{AUX}/space_mass"]
    events = store.read_jsonl(store.released(str(out), store.ALERTS))
    raised = [e for e in events if e["event"] == "raised" and e["signal"] == f"{AUX}/space_mass"]
    assert raised and raised[0]["period"] == 3
    alert = raised[0]["alert"]
    assert alert["since"] == 3 and alert["compare"] == [2, 3] and alert["value"] > alert["threshold"]
    assert "compare periods 2 and 3" in raised[0]["message"]
    assert all(e["period"] > 2 for e in events), "a calibration period cannot alert"
    # Fixed in period 5, which starts from period 2's clean model: the alert clears at once.
    assert [(e["event"], e["period"]) for e in events if e["signal"] == f"{AUX}/space_mass"] == \
        [("raised", 3), ("cleared", 5)]
    # Every transition reached the --on-alert command, as JSON, once.
    told = [json.loads(line) for line in sink.read_text().splitlines() if line.strip()]
    assert [(e["event"], e["period"], e["signal"]) for e in told] == \
        [(e["event"], e["period"], e["signal"]) for e in events]


def test_warm_start_carries_the_previous_runs_model_and_keeps_its_own_noise_state(monitor_store):
    """Exactly: period 2 starts from period 1's final weights, with a DP aggregator state of its own."""
    import tensorflow as tf

    from fedgen_debug.training.lm_run import LMRun, model_spec
    from fedgen_debug.training import dp_fedavg, loop
    from fedgen_debug.runs import secret as secret_lib

    _, out, _, _, _ = monitor_store
    previous, current = str(out / "period_001" / AUX), str(out / "period_002" / AUX)
    run = LMRun(**store.read_config(current)["lm"])
    config = run.training_config(8)
    secret = secret_lib.load(current)
    process = dp_fedavg.build_process(model_spec(run, 258), config, secret.tf_seed("dp-noise"))
    fresh = process.initialize()
    warm = loop.warm_started(process, fresh, previous)
    final = store.load_arrays(store.released(previous, store.MODEL_WEIGHTS))
    got = process.get_model_weights(warm)
    for a, b in zip(list(got.trainable) + list(got.non_trainable), final):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(tf.nest.flatten(warm.aggregator), tf.nest.flatten(fresh.aggregator)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="has not finished"):
        loop.warm_started(process, fresh, str(out / "period_009" / AUX))


def test_kill_9_mid_period_resumes_at_its_checkpoint_to_the_uninterrupted_result(monitor_store, tmp_path):
    """The killed monitor runs the store's plan cut to 3 periods (the alert is raised in period 3): with
    the same secret its periods are the uninterrupted monitor's first three."""
    _, reference, reference_ledger, _, _ = monitor_store
    ledger = _ledger(tmp_path / "ledger")
    periods = 3
    out, env, process = _monitor(tmp_path, "killed", plan={**MONITOR_PLAN, "periods": periods}, ledger=ledger,
                                 wait=False)
    checkpoint = out / "period_002" / AUX / "server" / "checkpoints" / "round_000010.npz"
    deadline = time.time() + 600
    while not checkpoint.exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.time() < deadline, "period 2 never reached its round-10 checkpoint"
        time.sleep(0.05)
    # No exit hook runs on kill -9: any TFF worker the monitor started dies with it (parent-death signal).
    workers = runtime.worker_processes(process.pid)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert eventually(lambda: not [w for w in workers if os.path.exists(f"/proc/{w}")]), workers
    status = store.read_json(store.released(str(out / "period_002" / AUX), store.STATUS))
    assert status["state"] == "running" and status["rounds_completed"] < 12
    assert not os.path.exists(store.period_record_path(str(out), 2))

    _, _, done = _monitor(tmp_path, "killed", plan={**MONITOR_PLAN, "periods": periods}, ledger=ledger, verbose=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {out / 'period_002' / AUX} from round 10" in done.stderr   # its checkpoint, not round 0
    assert f"{out / 'period_001' / AUX} from round" not in done.stderr   # a finished period is not run again
    # The same records and alerts as the uninterrupted monitor with the same secret ...
    ours, theirs = store.period_records(str(out)), store.period_records(str(reference))[:periods]
    assert [r["period"] for r in ours] == [1, 2, 3] and any(r.get("alerts") for r in ours)
    for a, b in zip(ours, theirs):
        for name, value in a["auxiliaries"][AUX]["signals"].items():
            assert value == pytest.approx(b["auxiliaries"][AUX]["signals"][name], rel=1e-5, abs=1e-9), name
        assert [x["signal"] for x in a.get("alerts", [])] == [x["signal"] for x in b.get("alerts", [])]
    assert [(e["event"], e["period"], e["signal"]) for e in store.read_jsonl(store.released(str(out), store.ALERTS))] \
        == [(e["event"], e["period"], e["signal"]) for e in store.read_jsonl(store.released(str(reference), store.ALERTS))
            if e["period"] <= periods]
    # ... and the same ledger: every release once (the reference's of these periods), the same ε.
    mine = Ledger(ledger).records()
    theirs_ids = {i for p in range(1, periods + 1) for i in store.read_json(
        store.released(str(reference / f"period_{p:03d}" / AUX), store.PRIVACY))["releases"]}
    assert theirs_ids <= {r.release_id for r in Ledger(reference_ledger).records()}
    assert sorted(r.release_id for r in mine) == sorted(theirs_ids)
    assert len({r.release_id for r in mine}) == len(mine)
    assert Ledger(ledger).total(mine[0].population).guarantee.epsilon == pytest.approx(ours[-1]["population_epsilon"])
    assert ours[-1]["population_epsilon"] == pytest.approx(theirs[-1]["population_epsilon"])


def test_a_plan_over_budget_is_refused_up_front_with_the_periods_it_affords(tmp_path, monkeypatch):
    ledger = tmp_path / "small-ledger"
    Ledger(str(ledger)).set_budget("*", 200.0, reason="test")
    plan = {**GAN_PLAN, "privacy": {**GAN_PLAN["privacy"], "noise_multiplier": 0.3}}
    check = subprocess.run([fedgen_cli(), "monitor", "--plan", _write(tmp_path, plan), "--out", "unused", "--check"],
                           env={**os.environ, LEDGER_ENV: str(ledger)}, capture_output=True, text=True, timeout=300)
    assert check.returncode == 1 and "affords" in check.stdout
    affordable = int(check.stdout.split("affords ")[1].split()[0])
    assert 0 < affordable < plan["periods"]
    out = tmp_path / "refused"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))   # the run through the same main() in this process
    done = run_main("monitor", "--plan", _write(tmp_path, plan), "--out", str(out))
    assert done.returncode == 2
    assert f"affords {affordable} period(s) of this plan, not the {plan['periods']}" in done.stderr
    assert "nothing ran" in done.stderr
    assert not out.exists() and Ledger(str(ledger)).records() == []


def _write(tmp_path, plan) -> str:
    path = tmp_path / f"plan-{abs(hash(json.dumps(plan, sort_keys=True)))}.json"
    path.write_text(json.dumps(plan))
    return str(path)


def test_a_period_that_no_longer_fits_is_refused_before_any_of_it_runs(tmp_path, monkeypatch):
    """The ledger's budget shrinks after period 1 (another release on the same users): period 2 is
    refused whole, with nothing trained, charged or released for it."""
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import PlanRefused, run_monitor

    home = tmp_path / "ledger"
    monkeypatch.setenv(LEDGER_ENV, str(home))
    Ledger(str(home)).set_budget("*", math.inf)
    plan = plan_from_dict(GAN_PLAN)
    out = tmp_path / "monitor"
    provision_secret(str(out), "monitor-refused")
    from fedgen_debug.monitor import runner

    original = runner.Monitor._period
    calls = []

    def period_then_shrink(self, period, secret, primary):
        calls.append(period)
        if period == 2:   # after period 1: the data owner lowers the budget to what is spent
            spent = Ledger(str(home)).total(self.key).guarantee.epsilon
            Ledger(str(home)).set_budget("*", spent * 1.0001)
        return original(self, period, secret, primary)

    monkeypatch.setattr(runner.Monitor, "_period", period_then_shrink)
    with pytest.raises(PlanRefused, match="period 2 was refused before anything of it ran"):
        run_monitor(plan, str(out))
    assert calls == [1, 2]
    assert [r["period"] for r in store.period_records(str(out))] == [1]
    assert not store.is_run(str(out / "period_002" / "gan-random"))
    # Period 1 trained and was measured (the GAN path: samples, dark share, Fréchet features).
    assert set(store.period_records(str(out))[0]["auxiliaries"]["gan-random"]["signals"]) == {"dark_background_share"}
    # The ledger holds period 1's releases and nothing of period 2.
    records = Ledger(str(home)).records()
    period_one = store.read_json(store.released(str(out / "period_001" / "gan-random"), store.PRIVACY))
    assert {r.release_id for r in records} == set(period_one["releases"])


@pytest.fixture(scope="module")
def gan_restart_monitor(tmp_path_factory):
    """A tiny GAN monitor run for 4 periods, then continued to 5 (its plan's periods raised), with the
    refusals met on the way. The test preset's GAN draws blank images after 2-3 rounds in every period
    (measured on its real samples); period 1 is declared healthy, to have a warm start go bad in 2."""
    from fedgen_debug.monitor import measure
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import PlanRefused, run_monitor

    tmp = tmp_path_factory.mktemp("gan-restart")
    home, out = tmp / "ledger", tmp / "monitor"
    raw = {**GAN_PLAN, "periods": 4, "first_period_rounds": 3, "rollout": None}
    real, calls, refused = measure.problem, [], {}

    def healthy_in_period_1(kind, measured):
        calls.append(real(kind, measured))
        return None if len(calls) == 1 else calls[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(measure, "problem", healthy_in_period_1)
        patch.setenv(LEDGER_ENV, _ledger(home))
        provision_secret(str(out), "monitor-restart")
        run_monitor(plan_from_dict(raw), str(out))
        charged = {r.release_id for r in Ledger(str(home)).records()}
        for name, changed in (("other plan", {**raw, "periods": 5, "samples": 32}), ("shorter", {**raw, "periods": 3})):
            with pytest.raises(ValueError) as error:
                run_monitor(plan_from_dict(changed), str(out))
            refused[name] = str(error.value)
        population = Ledger(str(home)).records()[0].population
        Ledger(str(home)).set_budget("*", Ledger(str(home)).total(population).guarantee.epsilon * 1.0001)
        with pytest.raises(PlanRefused) as error:
            run_monitor(plan_from_dict({**raw, "periods": 5}), str(out))
        refused["budget"] = str(error.value)
        refused["charged after the refusal"] = {r.release_id for r in Ledger(str(home)).records()} == charged
        Ledger(str(home)).set_budget("*", math.inf)
        records = run_monitor(plan_from_dict({**raw, "periods": 5}), str(out))
    return out, records, calls, refused, charged, Ledger(str(home))


def test_a_warm_start_that_stopped_learning_restarts_from_scratch_and_only_then(gan_restart_monitor):
    """A warm-started GAN whose samples turned blank (seen after a fix: a warm start from it stayed blank in
    every later period) trains the next period from scratch with the first period's rounds and says why;
    a fresh start that is blank too is warm-started from, and so is every run since (another restart would
    only spend ε again)."""
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import Monitor

    out, records, calls, _, _, _ = gan_restart_monitor
    aux = "gan-random"
    measured = [r["auxiliaries"][aux] for r in records]
    blank = "100% of its samples were blank (it had not learned its data)"
    assert calls == [blank] * 5
    assert [m["problem"] for m in measured] == [None, blank, blank, blank, blank]
    assert [m["next_from_scratch"] for m in measured] == [False, True, False, False, False]
    unlearned = "(it has not learned its data since it started from scratch)"
    assert [m["start"] for m in measured] == [
        "from scratch (first period)", "warm from period 1", f"from scratch: in period 2 {blank}",
        f"warm from period 3 {unlearned}", f"warm from period 4 {unlearned}"]
    periods = range(1, 6)
    warm = [store.read_config(str(out / f"period_00{p}" / aux))["monitor"]["warm_start_from"] for p in periods]
    assert warm == [None, f"period_001/{aux}", None, f"period_003/{aux}", f"period_004/{aux}"]
    rounds = [store.read_json(store.released(str(out / f"period_00{p}" / aux), store.STATUS))["rounds_completed"]
              for p in periods]
    assert rounds == [3, 2, 3, 2, 2]
    # The restarted GAN (period 3) is a new model: its drift is measured against its own clean periods
    # only (`signals.drift_reference`), and it has none (every period since is blank), so periods 3-5
    # carry the dark share alone; the calibration periods 1-2 have both signals.
    both = {"dark_background_share", "frechet_drift"}
    assert [set(m["signals"]) for m in measured] == [both, both] + [{"dark_background_share"}] * 3
    # A period under way keeps the start it began with, whatever the records say now (a resumed monitor,
    # possibly a newer fedgen-debug): period 3's run began from scratch.
    plan = plan_from_dict({**GAN_PLAN, "periods": 5, "first_period_rounds": 3, "rollout": None})
    monitor = Monitor(plan, str(out))
    assert monitor._start(3, plan.auxiliaries[0]) == (None, measured[2]["start"])
    assert monitor._start(5, plan.auxiliaries[0]) == (str(out / "period_004" / aux), measured[4]["start"])


def test_a_finished_monitor_goes_on_for_more_periods_when_only_its_periods_change(gan_restart_monitor):
    out, records, _, refused, charged, ledger = gan_restart_monitor
    assert "monitors another plan" in refused["other plan"]
    assert "has finished 4 periods; the plan cannot end before them" in refused["shorter"]
    # Over the budget: the extension is refused before anything of it runs.
    assert "affords 4 period(s) of this plan, not the 5 asked (4 done); nothing ran" in refused["budget"]
    assert refused["charged after the refusal"]
    assert [r["period"] for r in records] == [1, 2, 3, 4, 5]
    meta = store.read_json(store.released(str(out), store.MONITOR))
    assert meta["plan"]["periods"] == 5
    assert (meta["budget"]["affordable_periods"], meta["budget"]["checked_before_period"]) == (5, 5)
    period_five = store.read_json(store.released(str(out / "period_005" / "gan-random"), store.PRIVACY))["releases"]
    assert {r.release_id for r in ledger.records()} == charged | set(period_five)   # period 5's, once


def test_a_monitor_measured_with_other_signals_is_refused_before_it_resumes(gan_restart_monitor):
    """A store whose periods were measured with signals this version no longer measures (issue 15 renamed
    the word-LM's) has no calibration values for the new ones: refused by name, nothing changed."""
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import run_monitor

    out = gan_restart_monitor[0]
    path = store.released(str(out), store.MONITOR)
    saved = store.read_json(path)
    store.write_json(path, {**saved, "signals": ["gan-random/an_older_signal"]})
    try:
        with pytest.raises(ValueError, match=r"measured with the signals \['gan-random/an_older_signal'\]; this "
                                             r"version measures \['gan-random/dark_background_share'"):
            run_monitor(plan_from_dict({**GAN_PLAN, "periods": 6, "first_period_rounds": 3, "rollout": None}), str(out))
        assert store.read_json(path)["plan"] == saved["plan"]   # not extended to 6 periods
    finally:
        store.write_json(path, saved)


def test_an_alert_from_an_auxiliary_that_had_not_learned_its_data_says_so(tmp_path):
    from fedgen_debug.monitor.alerts import Alert
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import Monitor, _History

    monitor = Monitor(plan_from_dict(GAN_PLAN), str(tmp_path / "monitor"))
    monitor.history = _History()
    alert = Alert("gan-random/frechet_drift", 6, 6, 67.2, 40.0, "calibrated", (5, 6))
    monitor.history.problems = {5: {}, 6: {"gan-random": "100% of its samples were noise"}}
    noisy = monitor._alert_json(alert)
    assert noisy["auxiliary_problem"] == "100% of its samples were noise"
    assert noisy["message"].startswith(alert.describe())
    assert noisy["message"].endswith("But gan-random had not learned its data in period 6 (100% of its samples "
                                     "were noise): this alert says little about the data")
    monitor.history.problems[6] = {}
    assert monitor._alert_json(alert) == alert.to_json()


def test_a_monitor_releases_nothing_private(monitor_store):
    """The release boundary over the monitor: its own released files are declared and hold no secret
    material, no device id and no raw sentence; every period run passes the run-store walker."""
    from release_boundary import check_released, released_files

    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.runs import secret as secret_lib
    from fedgen_debug.device import lm_data

    _, out, _, _, _ = monitor_store
    data = data_spec.load_client_data(MONITOR_PLAN["data"])
    client_ids = sorted(data.client_ids)
    sentences = [s for cid in client_ids[:5] for s in lm_data.device_sentences(data, cid)[:3] if len(s) > 30]
    assert client_ids and sentences
    assert set(os.listdir(out / "released")) <= set(store.RELEASED_FILES)
    secret = secret_lib.load(str(out))
    needles = [f"{secret.entropy:064x}", str(secret.entropy)]
    for path in released_files(str(out)):   # the monitor's own released/ (period runs: below)
        raw = open(path, "rb").read()
        assert not any(n.encode() in raw for n in needles), path
        if path.endswith((".json", ".jsonl")):
            text = raw.decode()
            assert not any(f'"{cid}"' in text for cid in client_ids), path
            assert not any(s in text for s in sentences), path
    # A period's wall time depends on who was sampled: it stays server side (server/schedule.json).
    assert not any("finished_at" in json.dumps(r) for r in store.period_records(str(out)))
    assert len(store.read_json(store.server(str(out), store.SCHEDULE))) == MONITOR_PLAN["periods"]
    periods = sorted(p for p in os.listdir(out) if p.startswith("period_"))
    assert len(periods) == MONITOR_PLAN["periods"]
    for period in periods:
        check_released(str(out / period / AUX), client_ids=client_ids, sentences=sentences)


def test_every_runs_the_periods_on_a_cadence_grid_from_the_first_even_after_a_restart(tmp_path):
    """--every 24h: period p is due (p - 1) × 24 h after period 1 started, however long the periods took
    (the released due time would say when one finished: test_attacks_timing.py) and whether the monitor
    kept running or was restarted in between; a period already due runs at once."""
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import Monitor

    out = tmp_path / "monitor"
    plan = plan_from_dict({**GAN_PLAN, "cadence": "24h"})
    started = 1_000_000.0
    now = [started]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    monitor = Monitor(plan, str(out), sleep=sleep, clock=lambda: now[0])
    assert monitor.every == 24 * 3600
    monitor._wait_for(1)
    assert slept == []
    now[0] += 6 * 3600   # period 1 took 5 h; the monitor is restarted an hour after it finished
    monitor = Monitor(plan, str(out), sleep=sleep, clock=lambda: now[0])
    monitor._wait_for(2)
    assert now[0] == started + 24 * 3600 and sum(slept) == 18 * 3600 and max(slept) <= 3600
    meta = store.read_json(store.released(str(out), store.MONITOR))
    assert meta["state"] == "running" and meta["next_period_due_unix"] == started + 24 * 3600
    slept.clear()
    now[0] = started + 50 * 3600   # period 2 took 26 h: period 3 is overdue, no wait
    monitor._wait_for(3)
    assert slept == []
    assert store.read_json(store.released(str(out), store.MONITOR))["next_period_due_unix"] == started + 48 * 3600
    assert Monitor(plan_from_dict(GAN_PLAN), str(out)).every is None   # no cadence: back to back
