"""Timing across the release boundary (issue 53). How long a round takes depends on which clients the
secret sample drew and what they selected (a qualifying writer's device trains, the others send zero
updates), so a released value that tracks round durations names the rounds whose sample held a writer.
Before: the TensorBoard events' wall times reproduced server/timing.csv to 0.3 ms (on a GAN whose one
qualifying writer made a round take 29 ms instead of 16 ms, thresholding them named that writer's rounds
with 92% accuracy), and a monitor's released next_period_due_unix minus the cadence was when the
previous period finished. The attacks read only released/ and fail on any released number that tracks
the server's round timing; the control shows they find the timing wherever it is. server/ is owner-only.

File times: a file written at the end of its round would carry that time as its mtime and ctime (no
process can set a ctime back), so the per-round sample snapshots are staged in server/ and published
together when training ends; files rewritten each round (status.json, metrics.csv) keep only the last.
Not covered: whoever watches a run live (its progress bar, released/ while it trains).
"""

import csv
import os
import socket
import stat
import time
import zlib

import numpy as np
import pytest
import tensorflow as tf

from conftest import MONITOR_PLAN, ledger_with_unlimited_budget, provision_secret
from fedgen_debug.runs import store
from fedgen_debug.training import dp_fedavg, loop
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig

ROUNDS = 12
SLOW_DEVICE_SECONDS = 0.03   # what a qualifying device's training adds to a round (measured: 29 vs 16 ms)
CORRELATION = 0.9
EXACT = 1e-3                 # seconds: "the same time" within 1 ms

FEATURES = 8
SPEC = dp_fedavg.ModelSpec(
    lambda: tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="zeros", input_shape=(FEATURES,))]),
    tf.keras.losses.MeanSquaredError,
    (tf.TensorSpec([None, FEATURES], tf.float32), tf.TensorSpec([None, 1], tf.float32)))


def _linear_run(run_dir: str) -> None:
    """The smallest DP-FedAvg run, evaluated every round (a public statistic of the released weights):
    device c0 is slow, so a round's time says whether the secret sample drew it."""
    config = TrainingConfig(rounds=ROUNDS, eval_every=1, dp=DPConfig(3, 1.0, 0.5), client=ClientConfig(1, 4, 0.1),
                            server=ServerConfig("sgd", 1.0), seed=3, checkpoint_every=4)
    data = {}
    for i in range(6):
        x = np.random.default_rng(i).normal(size=(8, FEATURES)).astype(np.float32)
        data[f"c{i}"] = tf.data.Dataset.from_tensor_slices((x, x[:, :1] * 2.0))

    def client_dataset(cid, round_num):
        if cid == "c0":
            time.sleep(SLOW_DEVICE_SECONDS)
        return dp_fedavg.client_dataset(data[cid], config)

    def weight_norm(weights, round_num):
        return {"weight_norm": float(np.sqrt(sum(np.sum(np.square(w)) for w in weights.trainable)))}

    provision_secret(run_dir, "test_attacks_timing/linear")
    loop.train(lambda s: dp_fedavg.build_process(SPEC, config, s.tf_seed("dp-noise")),
               loop.Population("timing-attack-population", tuple(data)), client_dataset, config, run_dir,
               evaluate_fn=weight_norm)


def _gan_run(run_dir: str) -> None:
    """The release-boundary test's GAN (strict selection, a sample snapshot every round), 12 rounds; about
    half of the writers' devices are slow."""
    from fedgen_debug.device import gan_data
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.experiments.gan import train_gan

    images = gan_data.GanData.client_images

    def slow_client_images(self, client_id):
        if zlib.crc32(client_id.encode()) % 2 == 0:
            time.sleep(SLOW_DEVICE_SECONDS)
        return images(self, client_id)

    provision_secret(run_dir, "test_attacks_timing/gan")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gan_data.GanData, "client_images", slow_client_images)
        train_gan(GANRun("synthetic-images:writers=12,seed=3", "by-user-accuracy:low", 0.5, "test", rounds=ROUNDS,
                         primary_classes=10), run_dir)


@pytest.fixture(scope="module")
def timed_runs(tmp_path_factory):
    """{name: (run directory, (unix time it started, finished))}."""
    root = tmp_path_factory.mktemp("timing")
    runs = {}
    for name, train in (("linear", _linear_run), ("gan", _gan_run)):
        run_dir = str(root / name)
        started = time.time()
        train(run_dir)
        runs[name] = run_dir, (started, time.time())
    return runs


# ---- what the modeler reads --------------------------------------------------------------------------

def _json_numbers(value, where: str, out: dict) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        out[where] = float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _json_numbers(item, f"{where}/{key}", out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _json_numbers(item, f"{where}[{index}]", out)


def released_values(run_dir: str) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
    """Every number released/ holds outside arrays and images (model outputs), and every per-round series
    among them ({where: {round: value}}): JSON numbers (a list of numbers as a series by position), CSV
    cells (a column by its round column), TensorBoard scalars and the events' wall times (by step)."""
    numbers, series = {}, {}
    root = os.path.join(run_dir, store.RELEASED)
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            where = os.path.relpath(path, root)
            if name.endswith(".json"):
                found = {}
                _json_numbers(store.read_json(path), where, found)
                numbers.update(found)
                lists = {}
                for key, value in found.items():
                    if key.endswith("]"):
                        head, index = key[:-1].rsplit("[", 1)
                        lists.setdefault(head, {})[int(index) + 1] = value
                series.update({k: v for k, v in lists.items() if len(v) >= 5})
            elif name.endswith(".csv"):
                with open(path, newline="") as f:
                    rows = list(csv.DictReader(f))
                for row_index, row in enumerate(rows):
                    for column, cell in row.items():
                        try:
                            value = float(cell)
                        except (TypeError, ValueError):
                            continue
                        numbers[f"{where}:{row_index}:{column}"] = value
                        if "round" in row:
                            series.setdefault(f"{where}:{column}", {})[int(row["round"])] = value
            elif store.TENSORBOARD in where.split(os.sep):
                for index, event in enumerate(tf.compat.v1.train.summary_iterator(path)):
                    numbers[f"{where}#{index}:wall_time"] = event.wall_time
                    for value in event.summary.value:
                        scalar = float(tf.make_ndarray(value.tensor))
                        numbers[f"{where}#{index}:{value.tag}"] = scalar
                        series.setdefault(f"{where}:{value.tag}", {})[event.step] = scalar
                        series.setdefault(f"{where}:{value.tag}@wall_time", {})[event.step] = event.wall_time
    return numbers, series


# ---- the attack ----------------------------------------------------------------------------------------

def round_seconds(run_dir: str) -> dict[int, float]:
    """Ground truth, server side: how long each round took."""
    return {int(r["round"]): float(r["seconds"]) for r in store.read_csv(store.server(run_dir, store.TIMING))}


def _beyond_the_round(rounds, values: np.ndarray) -> np.ndarray:
    """`values` less their straight line in the round number: what the public schedule does not explain
    (a trend both share, e.g. rounds that get faster as caches warm while a loss falls, tells nothing
    about who was sampled; a series the round alone sets, like events stamped with their step, is 0)."""
    residual = values - np.polyval(np.polyfit(rounds, values, 1), rounds)
    return np.where(np.abs(residual) <= 1e-9 * max(1.0, np.ptp(values)), 0.0, residual)


def tracks_timing(values: dict[int, float], seconds: dict[int, float]) -> str | None:
    """How a per-round series gives the rounds' durations away (None: it does not): on 5 rounds or more,
    the values or their round-to-round differences equal the durations within 1 ms, or correlate with
    them beyond what the round number explains (|r| > 0.9 after each loses its line in the round).
    Round 1 is left out: it traces the computations, its time is the same whoever was sampled."""
    rounds = [r for r in sorted(values) if r in seconds and r > 1]
    steps = [r for r in rounds if r - 1 in values]
    candidates = (("value", rounds, [values[r] for r in rounds]),
                  ("difference", steps, [values[r] - values[r - 1] for r in steps]))
    for kind, at, series in candidates:
        x, y = np.array(series, np.float64), np.array([seconds[r] for r in at])
        if len(x) < 5 or not np.all(np.isfinite(x)):
            continue
        if np.max(np.abs(x - y)) < EXACT:
            return f"its {kind}s equal the round times within 1 ms"
        x, y = _beyond_the_round(at, x), _beyond_the_round(at, y)
        if np.std(x) > 0 and np.std(y) > 0 and abs(r := np.corrcoef(x, y)[0, 1]) > CORRELATION:
            return f"its {kind}s correlate with the round times (r = {r:.3f} beyond the round number)"
    return None


@pytest.mark.parametrize("name", ["linear", "gan"])
def test_attack_reading_the_round_times_from_released_values_fails(timed_runs, name):
    """Before: TensorBoard's wall times tracked the round times (their differences: r > 0.99) and were unix
    times of the run. Now no released series tracks them and no released number is a time of the run."""
    run_dir, (started, finished) = timed_runs[name]
    seconds = round_seconds(run_dir)
    assert sorted(seconds) == list(range(1, ROUNDS + 1))
    # Control: the slow devices make the round times say who was sampled, and the attack finds them
    # in the server's own timing (as a released column or event stamps it would).
    later = [seconds[r] for r in range(2, ROUNDS + 1)]
    assert max(later) - min(later) > SLOW_DEVICE_SECONDS / 2, seconds
    assert tracks_timing(seconds, seconds) is not None
    stamps = dict(zip(range(1, ROUNDS + 1), np.cumsum([seconds[r] for r in range(1, ROUNDS + 1)]) + started))
    assert tracks_timing(stamps, seconds) is not None

    numbers, series = released_values(run_dir)
    assert any("tensorboard" in where for where in series) and any("eval.csv" in where for where in series)
    leaks = {where: how for where, values in series.items() if (how := tracks_timing(values, seconds))}
    assert not leaks, leaks
    timestamps = {where: v for where, v in numbers.items() if started - 1 <= v <= finished + 1}
    assert not timestamps, timestamps
    # Nor do released names hold the time or the host (tf.summary's events.out.tfevents.<time>.<host>...).
    for directory, _, files in os.walk(os.path.join(run_dir, store.RELEASED)):
        for file_name in files:
            assert socket.gethostname() not in file_name, file_name
            assert not any(started - 1 <= int(part) <= finished + 1 for part in file_name.split(".") if part.isdigit()), \
                file_name


@pytest.mark.parametrize("name", ["linear", "gan"])
def test_attack_reading_the_round_times_from_released_file_times_fails(timed_runs, name):
    """Before: the GAN's sample snapshot of round r was written to released/ at the end of round r; the
    differences of their mtimes (and ctimes) tracked the round times at r = 0.996."""
    run_dir, _ = timed_runs[name]
    seconds = round_seconds(run_dir)
    snapshots = {r: os.stat(store.snapshot_path(run_dir, r)) for r in store.snapshot_rounds(run_dir)}
    assert len(snapshots) == (ROUNDS if name == "gan" else 0)
    staged = os.path.join(run_dir, store.SERVER, store.STAGED_SNAPSHOTS)
    assert not os.path.exists(staged) or not os.listdir(staged)   # all published
    for kind in ("st_mtime", "st_ctime"):
        times = {r: getattr(s, kind) for r, s in snapshots.items()}
        assert not times or tracks_timing(times, seconds) is None, (kind, tracks_timing(times, seconds))


def test_tensorboard_reads_the_released_scalars_by_round(timed_runs):
    """What TensorBoard reads (its event_accumulator): every metrics.csv and eval.csv value at its round,
    each event stamped with its step, in a file named by the round training started from."""
    from tensorboard.backend.event_processing import plugin_event_accumulator as event_accumulator

    run_dir, _ = timed_runs["gan"]
    directory = store.released(run_dir, store.TENSORBOARD)
    assert os.listdir(directory) == ["events.out.tfevents.0000000000.fedgen-debug"]
    accumulator = event_accumulator.EventAccumulator(directory, size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    expected = {}
    for name, prefix in ((store.METRICS, ""), (store.EVAL, "eval/")):
        for row in store.read_csv(store.released(run_dir, name)):
            for column, cell in row.items():
                if column != "round":
                    expected.setdefault(prefix + column, {})[int(row["round"])] = float(cell)
    assert "gen_loss" in expected and "eval/blank_share" in expected
    assert set(accumulator.Tags()["tensors"]) == set(expected)
    for tag, by_round in expected.items():
        events = accumulator.Tensors(tag)
        assert [e.step for e in events] == list(range(1, ROUNDS + 1)), tag
        assert [e.wall_time for e in events] == [float(e.step) for e in events], tag
        read = [float(tf.make_ndarray(e.tensor_proto)) for e in events]
        np.testing.assert_allclose(read, [by_round[e.step] for e in events], rtol=1e-6, err_msg=tag)


def test_a_resumed_run_adds_an_events_file_tensorboard_reads_after_the_first(tmp_path):
    """A run cut short and resumed writes its rounds again into a file named by the round it resumed from
    (its checkpoint's), after a START event: TensorBoard reads the files in name order and drops the
    cut rounds at the START, so it shows each round once, the resumed run's."""
    from tensorboard.backend.event_processing import plugin_event_accumulator as event_accumulator

    config = TrainingConfig(rounds=6, eval_every=1, dp=DPConfig(2, 1.0, 0.5), client=ClientConfig(1, 4, 0.1),
                            server=ServerConfig("sgd", 1.0), seed=3, checkpoint_every=3)
    x = np.ones((4, FEATURES), np.float32)
    data = {f"c{i}": tf.data.Dataset.from_tensor_slices((x, x[:, :1])) for i in range(3)}

    class Crash(Exception):
        pass

    def crash_after_round_5(round_num):
        if round_num == 5:
            raise Crash

    def train(after_round=None):
        return loop.train(lambda s: dp_fedavg.build_process(SPEC, config, s.tf_seed("dp-noise")),
                          loop.Population("timing-resume-population", tuple(data)),
                          lambda cid, r: dp_fedavg.client_dataset(data[cid], config), config, str(tmp_path / "run"),
                          evaluate_fn=lambda weights, r: {"round_seen": float(r)}, after_round=after_round)

    with pytest.raises(Crash):
        train(crash_after_round_5)   # its last checkpoint: round 3
    train()
    directory = store.released(str(tmp_path / "run"), store.TENSORBOARD)
    assert sorted(os.listdir(directory)) == ["events.out.tfevents.0000000000.fedgen-debug",
                                             "events.out.tfevents.0000000003.fedgen-debug"]
    accumulator = event_accumulator.EventAccumulator(directory, size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    events = accumulator.Tensors("eval/round_seen")
    assert [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events] == [(r, float(r)) for r in range(1, 7)]


# ---- the monitor's schedule ----------------------------------------------------------------------------

CADENCE = 3600.0
MONITOR_START = 1_000_000.0


@pytest.fixture(scope="module")
def monitors(tmp_path_factory):
    """Three monitors of one plan (3 periods an hour apart) whose periods took 100 s, 3000 s and 5000 s
    (longer than the cadence): {name: (directory, the next_period_due_unix released as each period began)}.
    A period here stands in for training: it takes its time on the monitor's clock, keeps when it
    finished on the server side as the monitor does (server/schedule.json) and saves the program state."""
    from fedgen_debug.monitor.plan import plan_from_dict
    from fedgen_debug.monitor.runner import Monitor
    from fedgen_debug.privacy.ledger import Ledger

    tmp = tmp_path_factory.mktemp("monitors")
    plan = plan_from_dict({**MONITOR_PLAN, "periods": 3, "cadence": "1h"})
    out = {}
    for name, took in (("fast", 100.0), ("slow", 3000.0), ("late", 5000.0)):
        directory = str(tmp / name)
        now = [MONITOR_START]

        def sleep(seconds, now=now):
            now[0] += seconds

        monitor = Monitor(plan, directory, ledger=Ledger(ledger_with_unlimited_budget(tmp / f"{name}-ledger")),
                          sleep=sleep, clock=lambda now=now: now[0])
        released = []

        def period(number, secret, primary, monitor=monitor, now=now, took=took, released=released):
            released.append(monitor._meta().get("next_period_due_unix"))
            now[0] += took
            path = store.server(monitor.out_dir, store.SCHEDULE)
            schedule = store.read_json(path) if os.path.exists(path) else {}
            store.write_json(path, {**schedule, str(number): now[0]})
            monitor.history.values[number] = {}
            monitor._save_state(number)

        monitor._period = period
        monitor.run()
        out[name] = directory, released + [monitor._meta().get("next_period_due_unix")]
    return out


def test_attack_reading_when_a_period_finished_from_the_released_schedule_fails(monitors):
    """Before: period p was due a cadence after period p - 1 finished, and monitor.json released it, so
    next_period_due_unix − cadence was when a period finished (its length depends on who was sampled).
    Now monitors of one plan whose periods took 100 s, 3000 s or longer than the cadence release the
    same schedule: a grid an hour apart from when period 1 started."""
    grid = [MONITOR_START, MONITOR_START + CADENCE, MONITOR_START + 2 * CADENCE]
    released = {name: due for name, (_, due) in monitors.items()}
    assert released["fast"] == released["slow"] == released["late"] == grid + [grid[-1]], released
    for name, (directory, _) in monitors.items():
        finished = store.read_json(store.server(directory, store.SCHEDULE))   # the server knows when
        assert [finished[str(p)] for p in (1, 2, 3)] != grid
        assert not {finished[str(p)] for p in (1, 2, 3)} & set(released[name])


# ---- server/ is owner-only --------------------------------------------------------------------------------

def _modes(directory: str) -> dict[str, int]:
    out = {}
    for root, _, files in os.walk(directory):
        out[root] = stat.S_IMODE(os.stat(root).st_mode)
        out.update({os.path.join(root, f): stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode) for f in files})
    return out


def test_the_server_part_of_runs_and_monitors_is_owner_only(timed_runs, monitors):
    """Before: server/ and checkpoints/ were 0755, timing.csv 0644: any user of the machine read the round
    times (and the monitor's program state). Now every directory below server/ is 0700, every file 0600."""
    directories = [run_dir for run_dir, _ in timed_runs.values()] + [d for d, _ in monitors.values()]
    for run_dir in directories:
        modes = _modes(os.path.join(run_dir, store.SERVER))
        assert any(p.endswith(store.TIMING) or store.PROGRAM_STATE in p for p in modes), sorted(modes)
        wrong = {p: oct(m) for p, m in modes.items() if m != (0o700 if os.path.isdir(p) else 0o600)}
        assert not wrong, wrong
    # Released files keep their modes (the app and the modeler read them): eval.csv as CsvLog writes it.
    eval_csv = store.released(timed_runs["linear"][0], store.EVAL)
    assert stat.S_IMODE(os.stat(eval_csv).st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
