"""RDP values on disk (`privacy.rdp_cache`): what another process computed, bit for bit, keyed by all it
depends on; a broken or unwritable cache costs a recomputation, never a wrong ε."""

import os
import subprocess
import sys

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp

from fedgen_debug import disk_cache
from fedgen_debug.privacy import accounting, rdp_cache


def _event(n=300, m=20, z=0.7, rounds=40):
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(n, m, dp_accounting.GaussianDpEvent(z)), rounds)


def _dp_accountings_own(event, relation=accounting.REPLACE_ONE) -> np.ndarray:
    accountant = rdp.RdpAccountant(list(accounting.RDP_ORDERS), accounting.neighboring_relation(relation))
    accountant.compose(event)
    return accountant.rdp


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "rdp"


def _files(cache) -> list[str]:
    return sorted(os.listdir(cache)) if cache.exists() else []


def test_a_value_computed_once_is_read_back_bit_for_bit_without_computing(cache):
    event, calls = _event(), []

    def compute():
        calls.append(1)
        return _dp_accountings_own(event)

    first = rdp_cache.rdp_values(event, "replace-one", accounting.RDP_ORDERS, compute)
    again = rdp_cache.rdp_values(event, "replace-one", accounting.RDP_ORDERS, compute)
    assert calls == [1] and len(_files(cache)) == 1
    assert first.tobytes() == again.tobytes() == _dp_accountings_own(event).tobytes()


def test_the_key_tells_apart_every_field_the_value_depends_on(cache):
    base = rdp_cache.key(_event(), "replace-one", accounting.RDP_ORDERS)
    others = {rdp_cache.key(_event(n=301), "replace-one", accounting.RDP_ORDERS),
              rdp_cache.key(_event(m=21), "replace-one", accounting.RDP_ORDERS),
              rdp_cache.key(_event(z=0.7000000000000001), "replace-one", accounting.RDP_ORDERS),
              rdp_cache.key(_event(rounds=41), "replace-one", accounting.RDP_ORDERS),
              rdp_cache.key(_event(), "add-remove", accounting.RDP_ORDERS),
              rdp_cache.key(_event(), "replace-one", accounting.RDP_ORDERS[:-1])}
    assert base not in others and len(others) == 6


@pytest.mark.parametrize("damage", [b"", b"not an array", np.zeros(3).tobytes(), "other arrays"])
def test_a_broken_file_is_computed_again_and_replaced(cache, damage):
    event = _event()
    rdp_cache.rdp_values(event, "replace-one", accounting.RDP_ORDERS, lambda: _dp_accountings_own(event))
    (name,) = _files(cache)
    if damage == "other arrays":   # a readable .npz without the values
        with open(cache / name, "wb") as f:
            np.savez(f, rdp=np.zeros(3))
    else:
        (cache / name).write_bytes(damage)
    values = rdp_cache.rdp_values(event, "replace-one", accounting.RDP_ORDERS, lambda: _dp_accountings_own(event))
    assert values.tobytes() == _dp_accountings_own(event).tobytes()
    assert np.load(cache / name)["rdp"].tobytes() == values.tobytes()


def test_off_or_an_unwritable_directory_computes_and_keeps_nothing(tmp_path, monkeypatch):
    event = _event()
    monkeypatch.setenv(disk_cache.CACHE_ENV, disk_cache.OFF)
    assert rdp_cache.cache_dir() is None
    assert rdp_cache.rdp_values(event, "replace-one", accounting.RDP_ORDERS, lambda: np.arange(3.0)).tolist() == [0, 1, 2]
    blocked = tmp_path / "file"
    blocked.write_text("")     # a file where the directory would be
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(blocked))
    values = rdp_cache.rdp_values(event, "replace-one", accounting.RDP_ORDERS, lambda: _dp_accountings_own(event))
    assert values.tobytes() == _dp_accountings_own(event).tobytes() and not list(tmp_path.glob("**/*.tmp"))


def test_a_second_process_reads_the_epsilon_the_first_computed(cache):
    """The point of the disk: a new command does not recompute its ledger's events. The second process's
    compute is made to fail, so its ε can only come from the file; and it is the first's exactly."""
    code = """
import sys
import dp_accounting
from fedgen_debug.privacy import accounting
if sys.argv[1] == "refuse":
    accounting._computed_rdp_of_event = lambda *a: (_ for _ in ()).throw(AssertionError("computed again"))
event = dp_accounting.SelfComposedDpEvent(dp_accounting.SampledWithoutReplacementDpEvent(
    500, 25, dp_accounting.GaussianDpEvent(0.9)), 60)
print(repr(accounting.epsilon_of_events([event], 1e-5).epsilon))
"""
    env = {**os.environ, disk_cache.CACHE_ENV: str(cache.parent)}
    runs = [subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, env=env, timeout=120)
            for mode in ("compute", "refuse")]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    assert runs[0].stdout == runs[1].stdout and float(runs[0].stdout) > 0
    assert len(_files(cache)) == 1
