"""Starting or resuming a run: its configuration, its secret, and the ledger charge of its releases.

    secret, resuming = open_run(run_dir, config_json)       # refuses another configuration
    charge([vocabulary, aggregate, training], run_dir, secret=secret, config_json=config_json)
    ... compute the releases, train ...

`charge` spends every record at once in the ledger (all or nothing, `privacy.ledger.Ledger.spend`);
only then does a new run exist on disk (its secret in `server/`, its config in `released/`), so a
refused run leaves nothing behind. Each charge is added to the run's released `privacy.json`: every
release of the run with its own (ε, δ) at δ = 0.01/N, and the population's total. The commands'
reports print each release's ε, marked above `accounting.EPSILON_WARNING` (e.g.
`cli.privacy_flags.privacy_lines`), so a charge is logged at INFO only: a warning here repeated each
release's mark in the log, once per charge (a run charges its records more than once). A resumed run charges the same records
again: the ledger finds them (nothing is charged twice) and re-validates them against its budget.

A record's `source` names the run that released it by `run_source(run_dir)`, its real path: the same
run reached through a relative path, an absolute one or a symlink is one run in the ledger (issue 54:
the Privacy page listed every GAN run twice, its training under the absolute path and its other
releases under the path as typed).
"""

from __future__ import annotations

import dataclasses
import logging
import os

from fedgen_debug.privacy.accounting import format_guarantee
from fedgen_debug.privacy.ledger import Ledger, PopulationTotal, PrivacyRecord
from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store
from fedgen_debug.runs.secret import RunSecret

logger = logging.getLogger(__name__)


def run_source(run_dir: str) -> str:
    """The `source` of a run's ledger records: its real path, whatever path the command was given."""
    return os.path.realpath(run_dir)


def open_run(run_dir: str, config_json: dict) -> tuple[RunSecret, bool]:
    """(secret, resuming): the saved secret of the run `run_dir` holds with this configuration; for a
    new run, one the server provisioned in `server/` beforehand, or a fresh one (kept in memory until
    the first charge)."""
    saved = store.read_config(run_dir)
    if saved is None:
        return secret_lib.load(run_dir) or RunSecret.fresh(), False
    if saved != config_json:
        raise ValueError(f"{run_dir} already holds a run with a different configuration "
                         f"({_differences(saved, config_json)}); choose another --out or delete it.")
    secret = secret_lib.load(run_dir)
    if secret is None:
        raise ValueError(f"{run_dir}: the run secret (server/{store.SECRET}) is missing, so the run cannot resume "
                         "with the same noise and samples; start a new run directory.")
    return secret, True


def _differences(saved: dict, asked: dict, prefix: str = "") -> str:
    """The settings that differ, as "key: SAVED there, ASKED now" (nested keys dotted), at most three. Both
    sides are public: the run's released config and the command's."""
    found = []
    for key in sorted(set(saved) | set(asked), key=str):
        a, b = saved.get(key), asked.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = _differences(a, b, f"{prefix}{key}.")
            found += [inner] if inner else []
        elif a != b:
            found.append(f"{prefix}{key}: {a!r} there, {b!r} now")
    return "; ".join(found[:3]) + ("; ..." if len(found) > 3 else "")


def charge(records, run_dir: str | None = None, *, secret: RunSecret | None = None, config_json: dict | None = None,
           delta: float | None = None, ledger: Ledger | None = None) -> dict[str, PopulationTotal]:
    """Charges `records` to the ledger (before anything is released), then records them in `run_dir`'s
    privacy.json with their own ε at `delta` (default: the population budget's δ). A run that does not
    exist yet is created by its first charge (needs `secret` and `config_json`). Records charged for
    `run_dir` are its releases (they go into its privacy.json): their source becomes `run_source(run_dir)`."""
    records = [records] if isinstance(records, PrivacyRecord) else list(records)
    if run_dir is not None:
        records = [dataclasses.replace(r, source=run_source(run_dir)) for r in records]
    totals = (ledger or Ledger()).spend(records)
    for record in records:
        total = totals[record.population]
        alone = record.guarantee(delta or total.guarantee.delta)
        logger.info("charged %s: %s; population %s in all: %s", record.label, format_guarantee(alone), record.population,
                    format_guarantee(total.guarantee))
    if run_dir is None:
        return totals
    if not store.is_run(run_dir):
        if secret is None or config_json is None:
            raise ValueError(f"{run_dir}: a new run needs its secret and configuration at its first charge.")
        secret_lib.save(run_dir, secret)
        store.write_json(store.released(run_dir, store.CONFIG), config_json)
    path = store.released(run_dir, store.PRIVACY)
    summary = store.read_json(path) if os.path.exists(path) else {"releases": {}}
    for record in records:
        total = totals[record.population]
        summary["population"], summary["population_size"] = record.population, total.population_size
        summary["releases"][record.release_id] = {**record.to_json(),
                                                  **record.guarantee(delta or total.guarantee.delta).as_dict()}
        summary["population_total"] = {**total.guarantee.as_dict(), "releases": len(total.releases),
                                       "budget": {"epsilon": total.budget.epsilon, "delta": total.budget.delta,
                                                  "source": total.budget.source}}
    store.write_json(path, summary)
    return totals


def annotate_release(run_dir: str, release_id: str, key: str, value) -> None:
    """Adds `key` = `value` (public: computed from the release's own parameters) to one release of the run's
    privacy.json, e.g. its deployment-equivalent privacy (`privacy.deployment.equivalents`)."""
    path = store.released(run_dir, store.PRIVACY)
    summary = store.read_json(path)
    summary["releases"][release_id][key] = value
    store.write_json(path, summary)


def run_privacy(run_dir: str) -> dict:
    """The released privacy summary of a run (see the module docstring)."""
    return store.read_json(store.released(run_dir, store.PRIVACY))
