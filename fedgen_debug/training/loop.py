"""The DP-FedAvg training loop: the ledger charge, secret sampling, rounds with a progress bar,
evaluation, checkpoints with exact resume, and only DP outputs in the released run store.

Order of a start (`train`, through `privacy.run_ledger`):
1. the configuration is compared with the run directory's (same: resume; different: refused), and the
   run secret read (resume) or created;
2. all T rounds are charged to the ledger: a budget that does not cover them refuses the run before
   anything is written; a resumed run's record is re-validated, not charged twice;
3. the process is built from the secret (`build_process(secret)`: the DP noise seed and any other
   training-time randomness);
4. every round samples qN clients from `population.client_ids` with the secret's sampling stream.
A scenario with releases before training (a DP vocabulary, DP counts) opens the run and charges them
together with `training_record(...)` first, then passes the same secret to `train`.

What is released per round: the round number and the process's `server` metrics (values the server
computes from DP outputs, e.g. the GAN generator's loss). Client metrics are never aggregated (the
processes drop them on the devices), and per-round wall time depends on which clients were sampled
and what they selected, so it stays in `server/timing.csv`; the TensorBoard events beside metrics.csv
carry the round as their time (`run_dir.ReleasedScalars`), not when they were written. After the first
round of every start the event the DP aggregator reported is checked against the one charged to the ledger.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Callable

import tensorflow_federated as tff

from fedgen_debug.privacy.accounting import DPFedAvgPrivacy
from fedgen_debug.privacy.ledger import Ledger, PopulationTotal, PrivacyRecord, event_to_json
from fedgen_debug.privacy.subpopulation import SubpopulationBound, pad_population
from fedgen_debug.progress import progress
from fedgen_debug.runs import store
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.privacy import deployment
from fedgen_debug.privacy.run_ledger import annotate_release, charge, open_run, run_source
from fedgen_debug.training import dp_fedavg
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training.config import TrainingConfig
from fedgen_debug.training.dp_query import adaptive_clip, released_event, round_event
from fedgen_debug.privacy.sampling import sample_clients

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Population:
    """Who may be sampled, under which ledger key. Strict selection: every user of the data (a device
    that does not qualify trains on nothing and sends a zero update); the paper's subpopulation mode:
    the users a selector picked (padded to qN, `privacy.subpopulation.pad_population`), with
    `subpopulation` the DP bound their training is accounted with: the ledger record then carries its
    N and its events the DP lower bound, never how many qualified."""

    key: str
    client_ids: tuple[str, ...]
    subpopulation: SubpopulationBound | None = None

    def __post_init__(self):
        if not self.client_ids:
            raise ValueError(f"population {self.key!r} has no clients.")
        object.__setattr__(self, "client_ids", tuple(sorted(self.client_ids)))

    @property
    def size(self) -> int:
        return len(self.client_ids)

    @property
    def accounted_size(self) -> int:
        """The population size training is accounted with: the DP lower bound of a subpopulation."""
        return self.size if self.subpopulation is None else self.subpopulation.lower_bound


def paper_subpopulation(trained: Population, qualified, bound: SubpopulationBound) -> Population:
    """The paper's subpopulation as the loop samples it: the `qualified` ids of `trained`, padded to qN
    with ids that did not qualify (they train on nothing), accounted with `bound`."""
    return Population(trained.key, pad_population(qualified, trained.client_ids, bound.clients_per_round), bound)


class SampledClients(Sequence):
    """A round's client datasets, each built when it is read. The tf backend's GAN reads a chunk of
    clients, packs and sums them, and lets them go before the next, so its memory does not grow with qN
    (`benchmarks/cohort_scaling.py`); its LM threads are handed every client at once (small text
    datasets). TFF's computations take a list (`list(...)` builds them all)."""

    def __init__(self, client_ids, client_dataset_fn: Callable, round_num: int):
        self._ids, self._fn, self._round = tuple(client_ids), client_dataset_fn, round_num

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._fn(cid, self._round) for cid in self._ids[index]]
        return self._fn(self._ids[index], self._round)


def round_datasets(process, client_ids, client_dataset_fn: Callable, round_num: int,
                   config: TrainingConfig | None = None):
    """What `process.next` takes for the sampled clients of round `round_num` (0-based): TFF's learning
    process gets the list of datasets it types (`dp_fedavg.ClientExamples` batched by `config`'s client
    work), our processes (tf backend, `GANProcess`) a `SampledClients` they stream."""
    clients = SampledClients(client_ids, client_dataset_fn, round_num)
    if isinstance(process, tff.templates.IterativeProcess):
        return [dp_fedavg.as_dataset(client, config) for client in clients]
    return clients


@dataclasses.dataclass(frozen=True)
class TrainingResult:
    run_dir: str
    rounds_completed: int
    model_weights: tff.learning.models.ModelWeights
    resumed_from: int
    privacy: PopulationTotal
    run_record: PrivacyRecord


def training_record(config: TrainingConfig, population: Population, secret: RunSecret, label: str,
                    run_dir: str) -> PrivacyRecord:
    """The record of T rounds, built from the event the DP query reports for one round; over a
    subpopulation, accounted with its DP lower bound (`privacy.subpopulation`)."""
    dp = config.dp
    if population.subpopulation is None:
        params = DPFedAvgPrivacy(dp.clients_per_round, population.size, dp.noise_multiplier, config.rounds,
                                 config.sampling, dp.accounting)
        size, event, extra_delta = population.size, params.dp_event(round_event(dp)), 0.0
    else:
        bound = population.subpopulation
        size = bound.population_size
        event, extra_delta = bound.training_event(dp.noise_multiplier, config.rounds, config.sampling, dp.accounting,
                                                  round_event(dp))
    return PrivacyRecord(population.key, size, dp.accounting, (event,), label or "training",
                         f"{secret.run_id}/training", extra_delta=extra_delta, source=run_source(run_dir))


def run_config(config: TrainingConfig, population: Population | str, label: str = "",
               extra_config: dict | None = None) -> dict:
    """The released config.json of a training run (a resume must match it exactly)."""
    return {"training": config.to_json(), "population": getattr(population, "key", population), "label": label, **(extra_config or {})}


def _same_event(a, b) -> bool:
    """Equal events up to float32 (TFF's DP factory keeps the event's numbers as float32 tensors)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_event(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_event(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-6)
    return a == b


def _aggregator_state(state):
    return state["aggregator"] if isinstance(state, Mapping) else state.aggregator


def train(build_process: Callable[[RunSecret], object], population: Population, client_dataset_fn: Callable,
          config: TrainingConfig, run_dir: str, *, label: str = "", evaluate_fn: Callable | None = None,
          extra_config: dict | None = None, after_round: Callable[[int], None] | None = None,
          secret: RunSecret | None = None, delta: float | None = None, ledger: Ledger | None = None,
          warm_start_from: str | None = None, initial_weights: Callable[[], object] | None = None) -> TrainingResult:
    """Runs (or resumes) `config.rounds` rounds and writes `run_dir`.

    `build_process(secret)` builds the learning process (`initialize`, `next`, `get_model_weights`)
    with its randomness from `secret`. `client_dataset_fn(client_id, round_num)` builds a sampled
    client's training data on its device for that round (a dataset, or `dp_fedavg.ClientExamples`
    batched by `config`'s client work; empty if the device does not qualify). `evaluate_fn(model_weights,
    round_num) -> dict` runs every `config.eval_every` rounds and at the end; it sees the weights after
    `round_num` rounds (post-processing of DP releases the run's ε covers) and must only read public data. `delta`: the δ this run's own ε is reported at (default: the population
    budget's). `secret`: the run's, when the caller opened the run to charge other
    releases first (`privacy.run_ledger.open_run`); by default the saved one, or a fresh one.
    `warm_start_from`: a finished run directory of the same model (the previous monitoring period); a
    new run starts from its final state (`warm_started`), a resumed one from its own checkpoint.
    `initial_weights()`: the model weights a new run starts from instead of its initialization (public
    pretraining, `experiments.public_init`; called only when the run starts, not when it resumes).
    """
    with store.exclusive(run_dir):
        return _train(build_process, population, client_dataset_fn, config, run_dir, label=label,
                      evaluate_fn=evaluate_fn, extra_config=extra_config, after_round=after_round, secret=secret,
                      delta=delta, ledger=ledger, warm_start_from=warm_start_from, initial_weights=initial_weights)


def warm_started(process, fresh_state, previous_run_dir: str):
    """`fresh_state` with the model of `previous_run_dir`'s final checkpoint (server side).

    What carries over is what the previous run computed from its DP aggregates (weights; the GAN's
    discriminator and optimizer states), which its ε covers; the DP aggregator's state (the noise
    seed) and anything else drawn from a secret stay this run's own."""
    status_path = store.released(previous_run_dir, store.STATUS)
    status = store.read_json(status_path) if os.path.exists(status_path) else {}
    latest = rd.latest_checkpoint(previous_run_dir)
    if status.get("state") != "finished" or latest is None or latest[0] != status["rounds"]:
        raise ValueError(f"{previous_run_dir}: cannot warm-start from a run that has not finished.")
    previous = rd.load_checkpoint(latest[1], fresh_state)
    if hasattr(process, "warm_start"):
        return process.warm_start(fresh_state, previous)
    return process.set_model_weights(fresh_state, process.get_model_weights(previous))


def _train(build_process, population, client_dataset_fn, config, run_dir, *, label, evaluate_fn, extra_config,
           after_round, secret, delta, ledger, warm_start_from, initial_weights) -> TrainingResult:
    config_json = run_config(config, population, label, extra_config)
    if config.dp.clients_per_round > population.size:
        raise ValueError(f"clients_per_round ({config.dp.clients_per_round}) exceeds the population "
                         f"({population.size} clients).")
    opened, _ = open_run(run_dir, config_json)
    if secret is not None and store.is_run(run_dir) and secret.run_id != opened.run_id:
        raise ValueError(f"{run_dir}: the given secret is not the run's.")
    secret = secret or opened
    record = training_record(config, population, secret, label, run_dir)
    # Before anything is written (new run) or trained (resume: re-validated, not charged twice).
    total = charge(record, run_dir, secret=secret, config_json=config_json, delta=delta, ledger=ledger)[population.key]
    dp = config.dp   # what its noise on the mean update is worth at a deployment, beside its own ε
    annotate_release(run_dir, record.release_id, deployment.RELEASE_KEY,
                     deployment.release_annotation(dp.noise_multiplier, dp.clients_per_round, config.rounds,
                                                   dp.matched_deployment))

    process = build_process(secret)
    state = process.initialize()
    start = 0
    latest = rd.latest_checkpoint(run_dir)
    if latest is not None:
        start, path = latest
        state = rd.load_checkpoint(path, state)
        logger.info("resuming %s from round %d", run_dir, start)
    elif warm_start_from is not None:
        state = warm_started(process, state, warm_start_from)
        logger.info("%s warm-started from %s", run_dir, warm_start_from)
    elif initial_weights is not None:
        state = process.set_model_weights(state, initial_weights())
        logger.info("%s starts from publicly pretrained weights", run_dir)
    metrics_log = store.CsvLog(store.released(run_dir, store.METRICS), start)
    eval_log = store.CsvLog(store.released(run_dir, store.EVAL), start)
    timing_log = store.CsvLog(store.server(run_dir, store.TIMING), start, private=True)
    scalars = rd.ReleasedScalars(run_dir, start)   # step-stamped: no wall time is released
    status_path = store.released(run_dir, store.STATUS)
    charged_round_event = event_to_json(round_event(config.dp))

    def log_scalars(row: dict, prefix: str = "") -> None:
        for k, v in row.items():
            if k != "round":
                scalars.scalar(prefix + k, v, row["round"])
        scalars.flush()

    def evaluate(round_num):
        if evaluate_fn is None:
            return
        values = evaluate_fn(process.get_model_weights(state), round_num)
        metrics = {"round": round_num, **store.flatten_metrics(values)}
        eval_log.append(metrics)
        log_scalars(metrics, "eval/")

    def write_status(state_name, completed):
        store.write_json(status_path, {"state": state_name, "rounds_completed": completed, "rounds": config.rounds})

    write_status("running" if start < config.rounds else "finished", start)
    # Named by the run directory: runs trained side by side (`runs.side_by_side`) show a bar each.
    run_name = os.path.basename(os.path.normpath(run_dir))
    for round_num in progress(range(start, config.rounds), desc=f"{run_name}: DP-FedAvg rounds", unit="round",
                              total=config.rounds - start):
        started = time.perf_counter()
        sampled = sample_clients(population.client_ids, config.dp.clients_per_round,
                                 secret.rng("sampling", round_num), config.sampling, population.accounted_size)
        output = process.next(state, round_datasets(process, sampled, client_dataset_fn, round_num, config))
        state = output.state
        if round_num == start and not _same_event(event_to_json(released_event(_aggregator_state(state))),
                                                  charged_round_event):
            raise AssertionError("the DP aggregator reported another event than the one charged to the ledger.")
        row = {"round": round_num + 1, **store.flatten_metrics(output.metrics.get("server", {}))}
        clip = adaptive_clip(_aggregator_state(state))
        if clip is not None:
            row["dp_clip"] = clip
        metrics_log.append(row)
        log_scalars(row)
        timing_log.append({"round": round_num + 1, "seconds": round(time.perf_counter() - started, 4)})
        if (round_num + 1) % config.checkpoint_every == 0 or round_num + 1 == config.rounds:
            rd.save_checkpoint(run_dir, state, round_num + 1)
        write_status("running", round_num + 1)
        if config.eval_every and (round_num + 1) % config.eval_every == 0 and round_num + 1 < config.rounds:
            evaluate(round_num + 1)
        if after_round is not None:
            after_round(round_num + 1)
    if start < config.rounds:
        evaluate(config.rounds)
    scalars.close()
    weights = process.get_model_weights(state)
    rd.save_model_weights(run_dir, weights)
    write_status("finished", config.rounds)
    return TrainingResult(run_dir, config.rounds, weights, start, total, record)
