"""`fedgen-debug monitor --plan PLAN --out DIR`: auxiliaries retrained period after period on a fleet
that changes, signals, calibrated thresholds and alerts, privacy composed over time (issue 14).

One period, in order:
1. the fleet's devices present in the period, with the examples the period brought them
   (`data.fleet`), as the devices see them after the rollout's bug (`device.rollout`);
2. every auxiliary's releases for the period are charged to the ledger together, all or nothing, and
   checked against the plan's budget: a period that does not fit is refused before any of it runs;
3. every auxiliary trains `plan.rounds(period)` rounds into `DIR/period_NNN/AUXILIARY/` (an ordinary
   run directory), warm-started from its previous period's final state, or, for a "last-clean" one
   (the LMs' default, `plan.WARM_STARTS`), from the last period whose signals were all within their
   thresholds (while an alert's periods run, each starts from the clean model, so its signal shows that
   period's data and clears with the fix); unless the previous period was a warm start from a healthy
   run and showed it had not learned its data (`measure.problem`: mostly blank or noise samples), in
   which case it starts from scratch with the first period's rounds;
4. the signals of every auxiliary (`measure`), drift against the last clean periods (`signals`),
   thresholds once the calibration periods are done, alerts (`alerts`); a period with an alert has each
   of its auxiliaries diagnosed against the last calibration period's (`diagnosis`), and every alert of
   that period carries its auxiliary's summary: what changed, or that the auxiliary is unhealthy;
5. the period record and the alerts are released (`tff.program` release managers into the run
   store, the log and `--on-alert`), then the program state (`tff.program.FileProgramStateManager`,
   server side) marks the period done.

A crash anywhere (`kill -9` included) resumes with the same command: finished periods are skipped
(program state), the interrupted period's runs resume at their last checkpoint and re-find their
ledger records (nothing is charged twice), a diagnosis already released is read instead of computed
again, and every period run's secret derives from the monitor's own (`server/secret.json`), so the
resumed monitor computes exactly what an uninterrupted one would.
Sinks are called at least once: an alert whose period was cut short after its sink ran is told again.

Before period 1 the whole plan is checked against the budget (`budget.check_budget`) and refused with
the number of periods it affords. `every` (or the plan's cadence) runs periods on a wall clock: they are
due on a grid `every` apart from when the first period with a cadence started, also across restarts;
a period already due runs at once. Not `every` after the previous period finished: monitor.json
releases when the next period is due, and how long a period took depends on which clients were sampled
and what they selected (when each finished stays in server/schedule.json).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import json
import logging
import math
import os
import subprocess
import time
from collections.abc import Callable

import numpy as np

from fedgen_debug.analysis import diagnosis_summary
from fedgen_debug.experiments import sweep
from fedgen_debug.monitor import alerts as alerts_lib
from fedgen_debug.monitor import budget as budget_lib
from fedgen_debug.monitor import diagnosis as diagnosis_lib
from fedgen_debug.monitor import inputs
from fedgen_debug.monitor import measure, signals
from fedgen_debug.monitor.plan import MonitorPlan, cadence_seconds, stored_plan_read_here
from fedgen_debug.privacy.accounting import format_epsilon
from fedgen_debug.privacy.ledger import population_key
from fedgen_debug.progress import progress
from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store

logger = logging.getLogger(__name__)


class PlanRefused(ValueError):
    """The plan (or its next period) does not fit the privacy budget; nothing of it ran."""


def period_dir(out_dir: str, period: int) -> str:
    return os.path.join(out_dir, f"period_{period:03d}")


def run_dir_of(out_dir: str, period: int, auxiliary) -> str:
    return os.path.join(period_dir(out_dir, period), auxiliary.name)


# ---- sinks: tff.program release managers ------------------------------------------------------------

def _release_managers():
    import tensorflow_federated as tff

    class PeriodReleaseManager(tff.program.ReleaseManager):
        """Releases a period record (key: the period) into the monitor's released store."""

        def __init__(self, out_dir: str):
            self.out_dir = out_dir

        async def release(self, value, key) -> None:
            store.write_json(store.period_record_path(self.out_dir, int(key)), value)

    class AlertReleaseManager(tff.program.ReleaseManager):
        """Releases the alert transitions up to a period (key): the whole alerts file in the store
        (rewritten, so a resumed period leaves the file an uninterrupted one would), the log, and the
        `--on-alert` command for each transition new in that period (the alert as JSON on its stdin
        and in $FEDGEN_DEBUG_ALERT)."""

        def __init__(self, out_dir: str, command: str | None):
            self.out_dir, self.command = out_dir, command

        async def release(self, value, key) -> None:
            store.write_jsonl(store.released(self.out_dir, store.ALERTS), value)
            for event in (e for e in value if e["period"] == int(key)):
                text = event["message"]
                (logger.warning if event["event"] == "raised" else logger.info)(text)
                if self.command:
                    _call(self.command, event)

    return PeriodReleaseManager, AlertReleaseManager


def _call(command: str, event: dict) -> None:
    payload = json.dumps(event, sort_keys=True)
    try:
        done = subprocess.run(command, shell=True, input=payload, text=True, timeout=120,
                              env={**os.environ, "FEDGEN_DEBUG_ALERT": payload}, capture_output=True)
    except subprocess.TimeoutExpired:
        logger.warning("--on-alert %r did not finish in 120 s", command)
        return
    if done.returncode != 0:
        logger.warning("--on-alert %r exited %d: %s", command, done.returncode, done.stderr.strip()[-500:])


# ---- the monitor ---------------------------------------------------------------------------------

@dataclasses.dataclass
class _History:
    """What the periods measured, in memory: the alert inputs and the drift inputs."""

    values: dict[int, dict[str, float]] = dataclasses.field(default_factory=dict)
    drift_inputs: dict[str, dict[int, object]] = dataclasses.field(default_factory=lambda: collections.defaultdict(dict))
    shares: dict[int, dict[str, int]] = dataclasses.field(default_factory=dict)   # signal -> samples
    problems: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)  # auxiliary -> problem
    diagnoses: dict[int, dict[str, dict]] = dataclasses.field(default_factory=dict)  # auxiliary -> summary
    starts: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)   # auxiliary -> how it began


class Monitor:
    def __init__(self, plan: MonitorPlan, out_dir: str, *, every: float | None = None, on_alert: str | None = None,
                 ledger=None, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time,
                 on_period: Callable[[dict], None] | None = None):
        from fedgen_debug.data import spec as data_spec
        from fedgen_debug.device.rollout import parse_rollout

        self.plan, self.out_dir, self.on_alert, self.ledger = plan, os.path.abspath(out_dir), on_alert, ledger
        self.sleep, self.clock = sleep, clock
        self.on_period = on_period   # called with each period's record, the done ones first on a resume
        self.every = every if every is not None else (cadence_seconds(plan.cadence) if plan.cadence else None)
        self.rollout = parse_rollout(plan.rollout, plan.seed) if plan.rollout else None
        inputs.check_inputs(plan, self.out_dir)   # the modeler's files, before the ledger is touched
        self.source = data_spec.load_client_data(plan.data)
        self.key = population_key(plan.data, self.source.client_ids, ledger)
        self.names = [n for a in plan.auxiliaries for n in measure.signal_names(a)]

    # -- state ------------------------------------------------------------------------------------
    def _state_manager(self):
        import tensorflow_federated as tff

        return tff.program.FileProgramStateManager(store.server(self.out_dir, store.PROGRAM_STATE), keep_total=3)

    def _saved_state(self) -> int:
        """The last finished period (0: none) from the program state."""
        # A list, not a dict: TF 2.14's SavedModel cannot trace a dict wrapper under this typing_extensions.
        structure = [np.int64(0), np.zeros((0, len(self.names)))]
        state, _ = asyncio.run(self._state_manager().load_latest(structure))
        return 0 if state is None else int(state[0])

    def _save_state(self, period: int) -> None:
        table = np.array([[self.history.values[p].get(n, math.nan) for n in self.names] for p in range(1, period + 1)],
                         np.float64).reshape(period, len(self.names))
        asyncio.run(self._state_manager().save([np.int64(period), table], period))
        store.owner_only(store.server(self.out_dir, store.PROGRAM_STATE))

    def _meta(self) -> dict:
        path = store.released(self.out_dir, store.MONITOR)
        return store.read_json(path) if os.path.exists(path) else {}

    def _write_meta(self, **changes) -> None:
        meta = {**self._meta(), **changes}
        store.write_json(store.released(self.out_dir, store.MONITOR), meta)

    # -- start ------------------------------------------------------------------------------------
    def _open(self) -> tuple[secret_lib.RunSecret, int]:
        """(the monitor's secret, the last finished period); a new monitor is checked against the
        budget first and refused whole when it does not fit."""
        from fedgen_debug.privacy.ledger import Ledger

        meta = self._meta()
        if meta:
            plan = json.loads(json.dumps(self.plan.to_json()))
            if meta.get("signals", self.names) != self.names:
                # Thresholds are calibrated on the first periods' values of each signal: a signal this version
                # measures and the saved periods do not hold (a renamed word-LM signal) cannot be calibrated.
                raise ValueError(f"{self.out_dir} was measured with the signals {meta['signals']}; this version "
                                 f"measures {self.names}. Start a new --out to monitor with them.")
            done = self._saved_state()
            read_here = stored_plan_read_here(meta.get("plan"), plan, os.getcwd())
            if read_here is not None:   # a monitor started before plans read their paths beside the plan file
                logger.info("%s: its stored plan's relative paths read from %s", self.out_dir, os.getcwd())
                self._write_meta(plan=read_here)
                meta = {**meta, "plan": read_here}
            if meta.get("plan") != plan:
                if {**meta.get("plan", {}), "periods": plan["periods"]} != plan:
                    raise ValueError(f"{self.out_dir} monitors another plan; choose another --out or delete it "
                                     "(only `periods` may change: to monitor longer).")
                self._extend(meta, done)
            secret = secret_lib.load(self.out_dir)
            if secret is None:
                raise ValueError(f"{self.out_dir}: the monitor's secret (server/{store.SECRET}) is missing; "
                                 "its periods cannot resume with the same noise. Start a new --out.")
            return secret, done
        check = budget_lib.check_budget(self.plan, self.source.client_ids, self.ledger or Ledger())
        if check.affordable_periods < self.plan.periods:
            raise PlanRefused(f"{check.message}, not the {self.plan.periods} it plans (ε after each period: "
                              f"{', '.join(format_epsilon(e) for e in check.epsilon_by_period)}). Plan at most "
                              f"{check.affordable_periods} period(s), add noise, or raise the budget; nothing ran.")
        secret = secret_lib.load(self.out_dir) or secret_lib.RunSecret.fresh()   # a provisioned one, or fresh
        secret_lib.save(self.out_dir, secret)
        self._write_meta(plan=self.plan.to_json(), state="running", periods_completed=0,
                         budget={"population": check.population, "epsilon": check.budget_epsilon,
                                 "delta": check.delta, "spent_before": check.spent_before,
                                 "affordable_periods": check.affordable_periods,
                                 "epsilon_by_period": list(check.epsilon_by_period)},
                         thresholds={}, signals=self.names)
        logger.info("%s", check.message)
        return secret, 0

    def _extend(self, meta: dict, done: int) -> None:
        """The same plan with more (or fewer, not below those done) periods: monitoring goes on, its new
        periods checked against the budget as a new plan's are."""
        from fedgen_debug.privacy.ledger import Ledger

        if self.plan.periods < done:
            raise ValueError(f"{self.out_dir} has finished {done} periods; the plan cannot end before them.")
        check = budget_lib.check_budget(self.plan, self.source.client_ids, self.ledger or Ledger(), done)
        if check.affordable_periods < self.plan.periods:
            raise PlanRefused(f"{check.message}, not the {self.plan.periods} asked ({done} done); nothing ran.")
        logger.info("%s: %d period(s) planned now, %d before (%d done)", self.out_dir, self.plan.periods,
                    meta["plan"]["periods"], done)
        self._write_meta(plan=self.plan.to_json(), state="running",
                         budget={**meta.get("budget", {}), "affordable_periods": check.affordable_periods,
                                 "checked_before_period": done + 1})

    def _primary(self) -> str | None:
        """The primary model the GAN auxiliaries share: the plan's (checked by `inputs.check_inputs`), or a
        CNN trained once on public data."""
        if not any(a.kind == "gan" for a in self.plan.auxiliaries):
            return None
        if self.plan.primary:
            return os.path.abspath(self.plan.primary)
        path = store.released(self.out_dir, store.PRIMARY)
        if not os.path.exists(path):
            from fedgen_debug.experiments.gan import train_public_primary

            preset = next(a.preset for a in self.plan.auxiliaries if a.kind == "gan")
            train_public_primary(path, preset, self.plan.seed)
        return path

    # -- periods ----------------------------------------------------------------------------------
    def run(self) -> list[dict]:
        with store.exclusive(self.out_dir):
            secret, done = self._open()
            inputs.install(self.plan, self.out_dir)
            primary = self._primary()
            self.history = _History()
            for period in range(1, done + 1):
                record = store.read_json(store.period_record_path(self.out_dir, period))
                self._remember(period, record)
                if self.on_period:
                    self.on_period(record)
            for period in progress(range(done + 1, self.plan.periods + 1), desc="monitor periods", unit="period",
                                   total=self.plan.periods - done):
                self._wait_for(period)
                self._period(period, secret, primary)
                if self.on_period:
                    self.on_period(store.read_json(store.period_record_path(self.out_dir, period)))
            self._write_meta(state="finished")
            return store.period_records(self.out_dir)

    def _wait_for(self, period: int) -> None:
        if not self.every:
            return
        due = self._due(period)
        # Released whether or not it is waited for: the schedule is the plan's, not when a period finished.
        self._write_meta(next_period_due_unix=due)
        while (wait := due - self.clock()) > 0:
            logger.info("period %d is due at %s (in %.0f s)", period,
                        datetime.datetime.fromtimestamp(due).isoformat(timespec="seconds"), wait)
            self._write_meta(state="waiting")
            self.sleep(min(wait, 3600.0))
        self._write_meta(state="running")

    def _due(self, period: int) -> float:
        """When `period` is due: on the grid `every` apart that starts when the first period with a cadence
        started (server/schedule.json's "start", set then). Whatever the periods took does not move it."""
        path = store.server(self.out_dir, store.SCHEDULE)
        schedule = store.read_json(path) if os.path.exists(path) else {}
        if "start" not in schedule:
            schedule["start"] = {"period": period, "unix": self.clock()}
            store.write_private_json(path, schedule)
        start = schedule["start"]
        return start["unix"] + (period - start["period"]) * self.every

    def _devices(self, period: int):
        from fedgen_debug.data.fleet import fleet_period

        return fleet_period(self.source, self.plan.fleet, period)

    def _charge_period(self, period: int, runs: dict, population) -> float:
        """Charges every auxiliary's releases of `period` at once (all or nothing) after checking the
        plan's budget; returns the population's ε after the period."""
        from fedgen_debug.privacy.ledger import Ledger, PrivacyBudgetExceeded
        from fedgen_debug.privacy.run_ledger import charge, run_source
        from fedgen_debug.experiments import gan, lm

        ledger = self.ledger or Ledger()
        records = []
        for auxiliary, (run, run_dir, run_secret) in runs.items():
            scenario = gan if auxiliary.kind == "gan" else lm
            # Charged without a run_dir (several runs at once), so each run's records get its source here.
            records += scenario.release_records(run, population, run_secret, run_source(run_dir))
        known = {r.release_id for r in ledger.records(self.key)}
        total = ledger.total(self.key, *[r for r in records if r.release_id not in known])
        delta, after = total.guarantee.delta, total.guarantee.epsilon
        if after > self.plan.budget_epsilon:
            raise PlanRefused(f"period {period} would bring population {self.key} to ε = {format_epsilon(after)} at δ = "
                              f"{delta:.2g}, over the plan's budget (ε = {format_epsilon(self.plan.budget_epsilon)}); it was "
                              "refused before anything of it ran.")
        try:
            totals = charge(records, ledger=ledger)
        except PrivacyBudgetExceeded as error:
            raise PlanRefused(f"period {period} was refused before anything of it ran: {error}") from None
        return totals[self.key].guarantee.epsilon

    def _period(self, period: int, secret, primary: str | None) -> None:
        from fedgen_debug.training.loop import Population

        devices = self._devices(period)
        population = Population(self.key, tuple(devices.client_ids))
        fraction = self.rollout.fraction(period) if self.rollout else 0.0
        runs, starts = {}, {auxiliary: self._start(period, auxiliary) for auxiliary in self.plan.auxiliaries}
        for auxiliary in self.plan.auxiliaries:
            run = budget_lib.period_run(self.plan, auxiliary, population.size, period, primary,
                                        from_scratch=starts[auxiliary][0] is None, out_dir=self.out_dir)
            run_dir = run_dir_of(self.out_dir, period, auxiliary)
            run_secret = secret.derive("monitor-runs", period, auxiliary.name)
            if secret_lib.load(run_dir) is None:   # provisioned before the run opens it (privacy.run_ledger.open_run)
                secret_lib.save(run_dir, run_secret)
            runs[auxiliary] = (run, run_dir, run_secret)
        epsilon = self._charge_period(period, runs, population)
        logger.info("period %d: rollout %s %.0f%% (simulation); population ε %s", period,
                    self.rollout.bug if self.rollout else "-", 100 * fraction, format_epsilon(epsilon))

        record = {"period": period, "rollout": {"bug": self.rollout.bug if self.rollout else None,
                                                "fraction": fraction},
                  "population_epsilon": epsilon, "auxiliaries": {}}
        update = None   # the rollout's stage, applied by the app on the images (GAN auxiliaries)
        if self.rollout is not None and self.rollout.bug == "invert" and fraction > 0:
            update = self.rollout.at(period)
        comparisons = []
        for auxiliary, (run, run_dir, _) in runs.items():
            previous, start = starts[auxiliary]
            context = ({"monitor": store.read_config(run_dir)["monitor"]} if store.is_run(run_dir)  # resumed: as begun
                       else {"monitor": {"period": period, "auxiliary": auxiliary.name, "start": start,
                                         "warm_start_from": previous and os.path.relpath(previous, self.out_dir)}})
            arm = sweep.Arm(auxiliary.name, run_dir, run, client_data=devices, context=context,
                            app_update=update if auxiliary.kind == "gan" else None, warm_start_from=previous)
            comparisons.append(sweep.Comparison(auxiliary.name, (arm,), {"auxiliary": auxiliary, "start": start}))

        def announce(comparison) -> None:
            auxiliary, start = comparison.about["auxiliary"], comparison.about["start"]
            if starts[auxiliary][0] is None and period > 1:
                logger.warning("period %d: %s starts %s; %d rounds", period, auxiliary.name, start,
                               comparison.arms[0].run.rounds)

        def measured_of(comparison) -> dict:
            auxiliary, start = comparison.about["auxiliary"], comparison.about["start"]
            run_dir = comparison.arms[0].run_dir
            measured = measure.measure(auxiliary.kind, run_dir, self.plan.samples, self.plan.seed)
            privacy = store.read_json(store.released(run_dir, store.PRIVACY))
            measured["run"] = os.path.relpath(run_dir, self.out_dir)
            measured["epsilon"] = store.training_release(privacy)["epsilon"]
            measured["start"] = start
            measured["problem"] = measure.problem(auxiliary.kind, measured)
            measured["next_from_scratch"] = self._went_bad(period, auxiliary, measured)
            if measured["problem"]:
                logger.warning("period %d: %s: %s; its signals say little about the data%s", period, auxiliary.name,
                               measured["problem"], "; the next period trains it from scratch"
                               if measured["next_from_scratch"] else "")
            return measured

        # Each auxiliary trains (resuming where a crash left it), then is measured, before the next.
        for comparison, measured in zip(comparisons, sweep.run_sweep(comparisons, measured_of, announce=announce)):
            record["auxiliaries"][comparison.name] = measured
        # When it finished stays server side: a period's wall time depends on who was sampled (timing.csv).
        path = store.server(self.out_dir, store.SCHEDULE)
        schedule = store.read_json(path) if os.path.exists(path) else {}
        store.write_private_json(path, {**schedule, str(period): self.clock()})
        self._remember(period, record)
        self._decide(period, record)

    def _start(self, period: int, auxiliary) -> tuple[str | None, str]:
        """(the run `auxiliary` warm-starts from in `period`, None: from scratch; how it starts).

        Warm from the previous period, unless that period was a warm start from a healthy one and had
        not learned its data (`measure.problem`: it went bad, and a warm start from it stays stuck).
        Only such a run restarts: a restart costs the first period's rounds of ε, and an auxiliary that
        has never been healthy since its last fresh start says the plan's noise or rounds do not suit
        it, which another restart would not change. A period already under way keeps its start."""
        run_dir = run_dir_of(self.out_dir, period, auxiliary)
        if store.is_run(run_dir):   # resumed: as it began (whatever a newer rule would say now)
            monitor = store.read_config(run_dir).get("monitor", {})
            warm_from = monitor.get("warm_start_from")
            start = monitor.get("start") or ("from scratch" if warm_from is None else f"warm from period {period - 1}")
            return (None if warm_from is None else os.path.join(self.out_dir, warm_from)), start
        if period == 1:
            return None, "from scratch (first period)"
        anchor = self._last_clean(period, auxiliary)
        if anchor is not None and anchor != period - 1:
            return (run_dir_of(self.out_dir, anchor, auxiliary),
                    f"warm from period {anchor}, its last within every threshold")
        warm = run_dir_of(self.out_dir, period - 1, auxiliary), f"warm from period {period - 1}"
        before = self._measured(period - 1, auxiliary)
        if not before.get("problem"):
            return warm
        if self._went_bad(period - 1, auxiliary, before):
            return None, f"from scratch: in period {period - 1} {before['problem']}"
        logger.warning("period %d: %s has not learned its data since its last start from scratch (%s); "
                       "warm-starting from it. Its plan may need less noise or more rounds.",
                       period, auxiliary.name, before["problem"])
        return warm[0], f"{warm[1]} (it has not learned its data since it started from scratch)"

    def _last_clean(self, period: int, auxiliary) -> int | None:
        """For a "last-clean" auxiliary: the last period before `period` in which every signal of it was
        within its threshold and it had learned its data (a calibration period is clean by the plan's
        word); None for a "previous" one or before the thresholds exist. Post-processing of releases."""
        calibration = self.plan.alerts.calibration_periods
        if auxiliary.warm_start != "last-clean" or period - 1 < calibration:
            return None
        thresholds = self._thresholds()
        for p in range(period - 1, 0, -1):
            if p <= calibration or self._clean(p, auxiliary, thresholds):
                return p
        return None

    def _went_bad(self, period: int, auxiliary, measured: dict) -> bool:
        """Whether `auxiliary`, measured in `period`, went bad after a warm start from a healthy run: the
        one case in which the next period starts it from scratch."""
        return bool(measured.get("problem")) and measured.get("start", "").startswith("warm") \
            and not self._measured(period - 1, auxiliary).get("problem")

    def _measured(self, period: int, auxiliary) -> dict:
        return store.read_json(store.period_record_path(self.out_dir, period))["auxiliaries"][auxiliary.name]

    # -- signals and decisions --------------------------------------------------------------------
    def _remember(self, period: int, record: dict) -> None:
        values, shares = {}, {}
        for auxiliary in self.plan.auxiliaries:
            measured = record["auxiliaries"][auxiliary.name]
            for name, is_share in measure.SIGNALS[auxiliary.kind]:
                value = measured["signals"].get(name)
                if value is not None:
                    values[f"{auxiliary.name}/{name}"] = float(value)
                if is_share:
                    shares[f"{auxiliary.name}/{name}"] = int(measured["samples"])
            drift = measure.DRIFT.get(auxiliary.kind)
            if drift is not None:
                run_dir = os.path.join(self.out_dir, measured["run"])
                self.history.drift_inputs[f"{auxiliary.name}/{drift}"][period] = measure.gan_features(run_dir)
        self.history.values[period] = values
        self.history.shares[period] = shares
        self.history.problems[period] = {name: m["problem"] for name, m in record["auxiliaries"].items()
                                         if m.get("problem")}
        self.history.diagnoses[period] = dict(record.get("diagnoses", {}))
        self.history.starts[period] = {name: m.get("start", "") for name, m in record["auxiliaries"].items()}

    def _drift(self, signal: str, period: int) -> float | None:
        """`signal`'s drift in `period` against its clean reference (`signals.drift_reference`); None when
        there is none (an auxiliary restarted from scratch, until it has a clean period of its own)."""
        calibration = self.plan.alerts.calibration_periods
        auxiliary = next(a for a in self.plan.auxiliaries if signal.startswith(f"{a.name}/"))
        since = max((p for p in range(1, period + 1)
                     if self.history.starts[p].get(auxiliary.name, "").startswith("from scratch")), default=1)
        thresholds = self._thresholds() if period > calibration else {}
        clean = [p for p in range(calibration + 1, period) if self._clean(p, auxiliary, thresholds)]
        reference = signals.drift_reference(period, calibration, clean, since)
        if not reference:
            return None
        from fedgen_debug.analysis.gan_analysis import frechet_distance

        return signals.reference_drift(self.history.drift_inputs[signal], reference, period, frechet_distance,
                                       signals.pool_features)

    def _clean(self, period: int, auxiliary, thresholds: dict[str, alerts_lib.Threshold]) -> bool:
        """Whether `auxiliary` was clean in `period` (after the calibration periods): every signal of it
        within its threshold (`thresholds`, from `_thresholds`), and it had learned its data."""
        values = self.history.values[period]
        past = any(values.get(n, -math.inf) > thresholds[n].value for n in measure.signal_names(auxiliary))
        return not (past or self.history.problems.get(period, {}).get(auxiliary.name))

    def _measure_drift(self, period: int) -> list[int]:
        """Sets the drift signals' values once `period` is measured; returns the periods whose values it set
        (drift is known once its reference, the calibration periods, is: for those, all at once). A drift
        that is not measured (`_drift` None) is left out of the values: not past any threshold."""
        calibration = self.plan.alerts.calibration_periods
        if period < calibration:
            return [period]
        rewrite = list(range(1, period + 1)) if period == calibration else [period]
        for p in rewrite:
            for signal in self.history.drift_inputs:
                drift = self._drift(signal, p)
                if drift is None:
                    self.history.values[p].pop(signal, None)
                else:
                    self.history.values[p][signal] = drift
        return rewrite

    def _decide(self, period: int, record: dict) -> None:
        PeriodReleaseManager, AlertReleaseManager = _release_managers()
        calibration = self.plan.alerts.calibration_periods
        rewrite = self._measure_drift(period)
        thresholds = self._thresholds() if period >= calibration else {}
        active = alerts_lib.active_alerts(self.history.values, thresholds, self.plan.alerts.persistence,
                                          self.plan.alerts.window)
        for p in rewrite:
            if active.get(p) and p > calibration:
                self._diagnose(p)
        events = self._events(active)
        releases = PeriodReleaseManager(self.out_dir)
        for p in rewrite:
            saved = record if p == period else store.read_json(store.period_record_path(self.out_dir, p))
            for auxiliary in self.plan.auxiliaries:
                signals_of = saved["auxiliaries"][auxiliary.name]["signals"]
                for name in measure.signal_names(auxiliary):
                    if name in self.history.values[p]:
                        signals_of[name.split("/", 1)[1]] = self.history.values[p][name]
            saved["alerts"] = [self._alert_json(a) for a in active.get(p, [])]
            if self.history.diagnoses.get(p):
                saved["diagnoses"] = self.history.diagnoses[p]
            asyncio.run(releases.release(saved, p))
        asyncio.run(AlertReleaseManager(self.out_dir, self.on_alert).release(events, period))
        self._write_meta(periods_completed=period,
                         thresholds={n: dataclasses.asdict(t) for n, t in thresholds.items()})
        self._save_state(period)

    def _thresholds(self) -> dict[str, alerts_lib.Threshold]:
        calibration = list(range(1, self.plan.alerts.calibration_periods + 1))
        out = {}
        for name in self.names:
            clean = [self.history.values[p][name] for p in calibration]
            samples = self.history.shares[calibration[0]].get(name)
            out[name] = alerts_lib.calibrate(name, clean, calibration, samples)   # samples: a share's
        return out

    def _diagnose(self, period: int) -> None:
        """Diagnoses every auxiliary of an alerting `period` not diagnosed yet (a resumed period keeps
        what its records hold, and `diagnosis` reads a report already released instead of computing it).

        The reference is the auxiliary of the last calibration period: the plan declares the calibration
        periods clean and the thresholds are calibrated on them, so "what changed" is against the same
        clean state the alert is; of those it is the latest, so the fewest rounds of training separate it
        from the periods after it (two trainings differ by their noise and progress alone); and it is the
        same one for every alert of the monitor, so two alerts' summaries compare. Not the alert's own
        baseline (`compare[0]`): a change that rose slowly can be under way there already."""
        reference = self.plan.alerts.calibration_periods
        done = self.history.diagnoses.setdefault(period, {})
        for auxiliary in self.plan.auxiliaries:
            if auxiliary.name in done:
                continue
            summary = diagnosis_lib.diagnose_run(run_dir_of(self.out_dir, reference, auxiliary),
                                                 run_dir_of(self.out_dir, period, auxiliary),
                                                 self.plan.samples, self.plan.seed, self.out_dir)
            done[auxiliary.name] = {**summary, "reference_period": reference, "period": period}
            logger.info("period %d: %s against period %d: %s", period, auxiliary.name, reference,
                        diagnosis_summary.headline(summary, _sides(done[auxiliary.name])))

    def _alert_json(self, alert: alerts_lib.Alert) -> dict:
        """The alert, with its auxiliary's diagnosis in that period (what changed, or that the auxiliary is
        unhealthy), and whether it had learned its data then: an alert from one that had not (a GAN drawing
        noise) is still raised, but says it is no evidence about the data."""
        out = alert.to_json()
        auxiliary = alert.signal.split("/", 1)[0]
        diagnosis = self.history.diagnoses.get(alert.period, {}).get(auxiliary)
        if diagnosis:
            out["diagnosis"] = diagnosis
            out["message"] += (f". Against period {diagnosis['reference_period']}, the last calibration period: "
                               f"{diagnosis_summary.headline(diagnosis, _sides(diagnosis))}")
        problem = self.history.problems.get(alert.period, {}).get(auxiliary)
        if problem:
            out["auxiliary_problem"] = problem
            out["message"] += (f". But {auxiliary} had not learned its data in period {alert.period} ({problem}): "
                               "this alert says little about the data")
        return out

    def _events(self, active) -> list[dict]:
        by_key = {(a.period, a.signal): a for alerts in active.values() for a in alerts}
        events = []
        for kind, period, signal in alerts_lib.transitions(active):
            if kind == "raised":
                alert = self._alert_json(by_key[(period, signal)])
                events.append({"event": "raised", "period": period, "signal": signal, "alert": alert,
                               "message": alert["message"]})
            else:
                events.append({"event": "cleared", "period": period, "signal": signal,
                               "message": f"cleared {signal}: back under its threshold in period {period}"})
        return events


def _sides(diagnosis: dict) -> dict:
    return {"a": f"period {diagnosis['reference_period']}", "b": f"period {diagnosis['period']}"}


def run_monitor(plan: MonitorPlan, out_dir: str, **options) -> list[dict]:
    """Runs (or resumes) the plan into `out_dir`; returns the period records."""
    return Monitor(plan, out_dir, **options).run()
