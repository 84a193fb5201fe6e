"""The DP-FedAvg training loop: sampling, rounds with a progress bar, evaluation, checkpoints with
exact resume, metrics, and the privacy record checked against the population's budget."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff

from fedgen_debug.privacy.accounting import DPFedAvgPrivacy
from fedgen_debug.privacy.ledger import PrivacyLedger, PrivacyRecord
from fedgen_debug.progress import progress
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training.config import TrainingConfig
from fedgen_debug.training.sampling import sample_clients

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrainingResult:
    run_dir: str
    rounds_completed: int
    model_weights: tff.learning.models.ModelWeights
    resumed_from: int


def privacy_record(config: TrainingConfig, population: str, population_size: int, label: str = "") -> PrivacyRecord:
    params = DPFedAvgPrivacy(config.dp.clients_per_round, population_size,
                             config.dp.noise_multiplier, config.rounds, config.sampling)
    return PrivacyRecord(population, population_size, config.sampling, (params.dp_event(),), label)


def _check_config(run_dir: str, config_json: dict) -> bool:
    """True when `run_dir` already holds this run (resume); raises if it holds another one."""
    path = os.path.join(run_dir, rd.CONFIG)
    if not os.path.exists(path):
        return False
    if rd.read_json(path) != config_json:
        raise ValueError(f"{run_dir} already holds a run with a different configuration; "
                         "choose another --out or delete it.")
    return True


def train(process: tff.learning.templates.LearningProcess, client_ids, client_dataset_fn: Callable,
          config: TrainingConfig, run_dir: str, population: str, *, label: str = "",
          evaluate_fn: Callable | None = None, extra_config: dict | None = None,
          after_round: Callable[[int], None] | None = None) -> TrainingResult:
    """Runs (or resumes) `config.rounds` rounds of `process` and writes `run_dir`.

    `client_dataset_fn(client_id)` builds a sampled client's training dataset on its device.
    `evaluate_fn(model_weights) -> dict` runs every `config.eval_every` rounds and at the end.
    """
    with rd.exclusive(run_dir):
        return _train(process, client_ids, client_dataset_fn, config, run_dir, population, label=label,
                      evaluate_fn=evaluate_fn, extra_config=extra_config, after_round=after_round)


def _train(process, client_ids, client_dataset_fn, config, run_dir, population, *, label, evaluate_fn,
           extra_config, after_round) -> TrainingResult:
    client_ids = sorted(client_ids)
    config_json = {"training": config.to_json(), "population": population, "label": label, **(extra_config or {})}
    resuming = _check_config(run_dir, config_json)
    record = privacy_record(config, population, len(client_ids), label)
    if config.dp.clients_per_round > len(client_ids):
        raise ValueError(f"clients_per_round ({config.dp.clients_per_round}) exceeds the population "
                         f"({len(client_ids)} clients).")
    if not resuming:
        parent = os.path.dirname(os.path.abspath(run_dir))
        if os.path.isdir(parent):
            PrivacyLedger(parent).check_budget(record)
        os.makedirs(run_dir, exist_ok=True)
        rd.write_json(os.path.join(run_dir, rd.CONFIG), config_json)
        # Written before the first round: a crashed run has still spent (part of) its budget.
        record.write(run_dir)

    state = process.initialize()
    start = 0
    latest = rd.latest_checkpoint(run_dir)
    if latest is not None:
        start, path = latest
        state = rd.load_checkpoint(path, state)
        logger.info("resuming %s from round %d", run_dir, start)
    metrics_log = rd.CsvLog(os.path.join(run_dir, rd.METRICS), start)
    eval_log = rd.CsvLog(os.path.join(run_dir, rd.EVAL), start)
    writer = tf.summary.create_file_writer(os.path.join(run_dir, rd.TENSORBOARD))
    status_path = os.path.join(run_dir, rd.STATUS)

    def log_scalars(row: dict, prefix: str = "") -> None:
        with writer.as_default():
            for k, v in row.items():
                if k != "round":
                    tf.summary.scalar(prefix + k, v, step=row["round"])

    def evaluate(round_num):
        if evaluate_fn is None:
            return
        metrics = {"round": round_num, **rd.flatten_metrics(evaluate_fn(process.get_model_weights(state)))}
        eval_log.append(metrics)
        log_scalars(metrics, "eval/")

    def write_status(state_name, completed):
        rd.write_json(status_path, {"state": state_name, "rounds_completed": completed, "rounds": config.rounds})

    write_status("running", start)
    for round_num in progress(range(start, config.rounds), desc="DP-FedAvg rounds", unit="round",
                              total=config.rounds - start):
        started = time.perf_counter()
        sampled = sample_clients(client_ids, config.dp.clients_per_round, config.seed, round_num, config.sampling)
        output = process.next(state, [client_dataset_fn(cid) for cid in sampled])
        state = output.state
        row = {"round": round_num + 1, "clients": len(sampled), "seconds": round(time.perf_counter() - started, 4),
               **rd.flatten_metrics(output.metrics.get("client_work", {}).get("train", {}), "train/")}
        metrics_log.append(row)
        log_scalars(row)
        if (round_num + 1) % config.checkpoint_every == 0 or round_num + 1 == config.rounds:
            rd.save_checkpoint(run_dir, state, round_num + 1)
        write_status("running", round_num + 1)
        if config.eval_every and (round_num + 1) % config.eval_every == 0 and round_num + 1 < config.rounds:
            evaluate(round_num + 1)
        if after_round is not None:
            after_round(round_num + 1)
    evaluate(config.rounds)
    writer.flush()
    weights = process.get_model_weights(state)
    rd.save_model_weights(run_dir, weights)
    write_status("finished", config.rounds)
    return TrainingResult(run_dir, config.rounds, weights, start)
