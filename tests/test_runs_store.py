"""The run store (released vs server-side files, the allow-list, TF-free) and the run secret."""

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store
from fedgen_debug.runs.secret import RunSecret


def test_released_and_server_paths_are_separate_and_only_declared_names_pass(tmp_path):
    run = str(tmp_path / "run")
    assert store.released(run, store.MODEL_WEIGHTS) == os.path.join(run, "released", "model_weights.npz")
    assert store.server(run, store.CHECKPOINTS, "round_000001.npz").startswith(os.path.join(run, "server"))
    with pytest.raises(ValueError, match="not a released run file; declare it"):
        store.released(run, "client_metrics.csv")
    with pytest.raises(ValueError, match="not a released run file"):
        store.released(run, store.SECRET)  # a server-side name can never be released
    with pytest.raises(ValueError, match="not a server-side run file"):
        store.server(run, "anything.json")
    assert not set(store.RELEASED_FILES) & set(store.SERVER_FILES)


def test_the_store_and_the_secret_import_without_tensorflow():
    code = ("import sys; from fedgen_debug.runs import store, secret; from fedgen_debug.privacy import run_ledger; "
            "import fedgen_debug.privacy.ledger, fedgen_debug.privacy.accounting; "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_csv_log_drops_rows_past_a_resume_and_rows_cut_short(tmp_path):
    path = str(tmp_path / "released" / "metrics.csv")
    log = store.CsvLog(path, 0)
    for r in (1, 2, 3):
        log.append({"round": r, "gen_loss": r / 10})
    with open(path, "a") as f:
        f.write("4,")  # a crash mid-row
    store.CsvLog(path, 2)
    assert [row["round"] for row in store.read_csv(path)] == ["1", "2"]


def test_run_dirs_finds_runs_by_their_released_config(tmp_path):
    for name in ("a", "b/c"):
        store.write_json(store.released(str(tmp_path / name), store.CONFIG), {"x": 1})
    os.makedirs(tmp_path / "d" / "released")  # not a run: no config
    assert store.run_dirs(str(tmp_path)) == [str(tmp_path / "a"), str(tmp_path / "b" / "c")]
    assert store.released_config(str(tmp_path / "a")) == {"x": 1}
    store.write_json(store.released(str(tmp_path / "a"), store.STATUS), {"state": "running"})
    store.write_json(store.released(str(tmp_path / "b" / "c"), store.STATUS), {"state": "finished"})
    assert [store.is_finished(str(tmp_path / d)) for d in ("a", "b/c", "d")] == [False, True, False]
    # One refusal, worded once, for every command that reads a run (preflight, diagnose, calibrate, load_*).
    for not_a_run in (tmp_path / "d", tmp_path / "missing"):
        with pytest.raises(ValueError, match=f"^{not_a_run}: not a run directory \\(no released config\\)\\.$"):
            store.released_config(str(not_a_run))


def test_secrets_are_fresh_streams_are_independent_and_nothing_prints_them(tmp_path):
    a, b = RunSecret.fresh(), RunSecret.fresh()
    assert a.entropy != b.entropy and a.run_id != b.run_id and 0 < a.entropy < 2 ** 256
    assert a.tf_seed("dp-noise") != a.tf_seed("sampling") != b.tf_seed("sampling")
    assert a.tf_seed("dp-noise") == RunSecret(a.entropy).tf_seed("dp-noise")
    assert all(0 <= v < 2 ** 63 for v in a.tf_seed("dp-noise"))
    draws = np.stack([a.rng("sampling", r).random(1000) for r in range(3)])
    assert abs(np.corrcoef(draws)[0, 1]) < 0.1 and not np.array_equal(draws[0], draws[1])
    assert a.rng("aggregate-noise", "x").random() != a.rng("aggregate-noise", "y").random()
    assert format(a.entropy, "x") not in repr(a) and a.run_id in repr(a)
    with pytest.raises(ValueError, match="unknown secret stream"):
        a.rng("my-stream")


def test_a_saved_secret_is_owner_readable_only_and_round_trips(tmp_path):
    run = str(tmp_path / "run")
    assert secret_lib.load(run) is None
    s = RunSecret.fresh()
    secret_lib.save(run, s)
    assert secret_lib.load(run) == s
    mode = stat.S_IMODE(os.stat(store.server(run, store.SECRET)).st_mode)
    assert mode == 0o600


def test_owner_only_closes_a_server_path_and_the_directories_above_it_up_to_server(tmp_path):
    """What the server writes below server/ is 0600 in 0700 directories (test_attacks_timing.py walks real
    runs); a legacy 0755 server/ closes when a file is next written into it; nothing outside server/ is
    touched, and a path outside a server/ part is refused."""
    run = tmp_path / "run"
    (run / "server" / "program_state" / "1").mkdir(parents=True, mode=0o755)
    (run / "server" / "program_state" / "1" / "state.pb").write_text("x")
    run.chmod(0o755)
    (run / "server").chmod(0o755)
    log = store.CsvLog(store.server(str(run), store.TIMING), 0, private=True)
    log.append({"round": 1, "seconds": 0.5})
    store.owner_only(store.server(str(run), store.PROGRAM_STATE))
    modes = {p.relative_to(run).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in run.rglob("*")}
    assert modes == {"server": 0o700, "server/timing.csv": 0o600, "server/program_state": 0o700,
                     "server/program_state/1": 0o700, "server/program_state/1/state.pb": 0o600}
    assert stat.S_IMODE(run.stat().st_mode) == 0o755   # the run directory itself: as it was
    with pytest.raises(ValueError, match="not below a run's server/ part"):
        store.owner_only(store.released(str(run), store.CONFIG))
