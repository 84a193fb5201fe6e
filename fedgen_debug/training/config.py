"""Frozen, validated configuration of a DP-FedAvg training run. CLI flags only build these."""

from __future__ import annotations

import dataclasses
import logging
import os

from fedgen_debug.data import spec as data_spec
from fedgen_debug.privacy.accounting import (ACCOUNTINGS, REPLACE_ONE, SAMPLINGS, WITHOUT_REPLACEMENT,
                                             check_accounting)
from fedgen_debug.validation import (check_at_least, check_in_range, check_non_negative, check_one_of,
                                     check_positive)

SERVER_OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam")

# Who runs the rounds. Not part of a run's configuration: both give the same run and a run resumes on
# either (`training.tf_backend`). `tf`: in-process TensorFlow, the default (faster; a GPU when present);
# `tff`: TFF's runtime, the reference implementation. `$FEDGEN_DEBUG_BACKEND` (the CLI's `--backend`)
# picks one for the whole process.
BACKENDS = ("tf", "tff")
BACKEND_ENV = "FEDGEN_DEBUG_BACKEND"


def check_backend(backend: str) -> str:
    return check_one_of("backend", backend, BACKENDS)


def resolve_backend(backend: str | None = None) -> str:
    """`backend`, else `$FEDGEN_DEBUG_BACKEND`, else "tf"; checked."""
    return check_backend(backend or os.environ.get(BACKEND_ENV) or "tf")


@dataclasses.dataclass(frozen=True)
class DPConfig:
    """User-level DP of the aggregate: clip each client update to L2 ≤ `clip`, average over the fixed
    `clients_per_round` (qN) and add N(0, σ²), σ = z·clip/qN. There is no default noise: z = 0 (with
    or without `clip=None`, plain FedAvg through the same code path) must be asked for, and its ε is ∞.
    `accounting` is the neighbouring relation the DP query reports its event under
    (`fedgen_debug.privacy.accounting`): replace-one (sensitivity 2S, the default), add-remove (Poisson
    sampling) or the papers' convention. `clip_quantile` (opt-in): `clip` is only the first round's; the
    clip then follows that quantile of the norms of the updates clients send, estimated with DP inside the
    same ε (`dp_query.AdaptiveClipSumQuery`), so no one clip has to suit every kind of data."""

    clients_per_round: int
    noise_multiplier: float
    clip: float | None
    accounting: str = REPLACE_ONE
    clip_quantile: float | None = None
    clip_learning_rate: float = 0.2   # the adaptive clip's geometric step (Andrew et al.): at most e^±rate a round
    # The deployment whose noise on the mean update this z matches (`privacy.deployment`, "N=..,rounds=..,qN=..,z=.."),
    # recorded so that the run's privacy.json reports the deployment's ε beside its own.
    matched_deployment: str | None = None

    def __post_init__(self):
        check_at_least("clients_per_round", self.clients_per_round, 1)
        check_non_negative("noise_multiplier", self.noise_multiplier)
        check_one_of("accounting", self.accounting, ACCOUNTINGS)
        if self.clip is not None:
            check_positive("clip", self.clip)
        elif self.noise_multiplier > 0:
            raise ValueError("noise_multiplier > 0 needs a clip (the noise is calibrated to it). Found clip=None.")
        if self.clip_quantile is not None:
            check_in_range("clip_quantile", self.clip_quantile, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
            if self.clip is None:
                raise ValueError("clip_quantile adapts a clip: give the first round's clip too. Found clip=None.")
        check_positive("clip_learning_rate", self.clip_learning_rate)

    @property
    def noise_stddev(self) -> float:
        """σ = zS/(qN), the std of the noise added to the averaged update (the first round's, when the
        clip adapts)."""
        if self.clip is None:
            return 0.0
        return self.noise_multiplier * self.clip / self.clients_per_round


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """A device's local training in a round: `epochs` passes in batches of `batch_size` at SGD rate
    `learning_rate`, over all its examples or, with `max_examples`, over a random subset of at most that
    many drawn afresh each round (`dp_fedavg.round_examples`): a round's cost is bounded by the cap, not
    by the device with the most data."""

    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 0.5
    max_examples: int | None = None

    def __post_init__(self):
        check_at_least("client epochs", self.epochs, 1)
        check_at_least("client batch_size", self.batch_size, 1)
        check_positive("client learning_rate", self.learning_rate)
        if self.max_examples is not None:
            check_at_least("client max_examples", self.max_examples, 1, note="None: no cap")


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    optimizer: str = "sgd"
    learning_rate: float = 1.0
    momentum: float = 0.9

    def __post_init__(self):
        check_one_of("server optimizer", self.optimizer, SERVER_OPTIMIZERS)
        check_positive("server learning_rate", self.learning_rate)
        check_in_range("server momentum", self.momentum, 0.0, 1.0, high_inclusive=False)


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    rounds: int
    dp: DPConfig
    client: ClientConfig = ClientConfig()
    server: ServerConfig = ServerConfig()
    seed: int = 0                  # public randomness only (model init); DP noise and sampling: the run secret
    sampling: str = WITHOUT_REPLACEMENT
    eval_every: int = 0
    checkpoint_every: int = 10

    def __post_init__(self):
        check_at_least("rounds", self.rounds, 1)
        check_one_of("sampling", self.sampling, SAMPLINGS)
        check_accounting(self.sampling, self.dp.accounting)
        check_at_least("eval_every", self.eval_every, 0, note="0 = never")
        check_at_least("checkpoint_every", self.checkpoint_every, 1)

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        # Runs from before these options resume with the config they saved.
        if self.client.max_examples is None:
            del out["client"]["max_examples"]
        if self.dp.clip_quantile is None:
            del out["dp"]["clip_quantile"], out["dp"]["clip_learning_rate"]
        if self.dp.matched_deployment is None:
            del out["dp"]["matched_deployment"]
        return out

    @classmethod
    def from_json(cls, data: dict) -> "TrainingConfig":
        return cls(**{**data, "dp": DPConfig(**data["dp"]), "client": ClientConfig(**data["client"]),
                      "server": ServerConfig(**data["server"])})


SELECTIONS = ("strict", "paper")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacySettings:
    """The privacy settings a modeler gives a run (the training commands' flags). `None` keeps the
    preset's value; `delta` None reports ε at 0.01/N. `selection`: "strict" (every user may be sampled,
    non-qualifying devices send zero updates, ε over all N) or "paper" (the qualifying subpopulation,
    augenstein2020's accounting). Scenario runs (`LMRun`, `GANRun`) inherit these fields."""

    rounds: int | None = None
    clients_per_round: int | None = None
    noise_multiplier: float | None = None
    clip: float | None = None
    delta: float | None = None
    sampling: str = WITHOUT_REPLACEMENT
    selection: str = "strict"
    clip_quantile: float | None = None   # adapt the clip (`DPConfig.clip_quantile`); None: the preset's
    # z from a deployment's noise on the mean update (`privacy.deployment.deployment_from_spec`: "N=..,rounds=..,
    # qN=..,z=.." or "N=..,rounds=..,epsilon=.."; rounds default to the run's): instead of noise_multiplier.
    match_deployment: str | None = None

    def check_privacy_settings(self) -> None:
        from fedgen_debug.privacy.accounting import check_delta

        check_one_of("selection", self.selection, SELECTIONS)
        check_one_of("sampling", self.sampling, SAMPLINGS)
        for name in ("rounds", "clients_per_round"):
            if getattr(self, name) is not None:
                check_at_least(name, getattr(self, name), 1)
        if self.noise_multiplier is not None:
            check_non_negative("noise_multiplier", self.noise_multiplier)
        if self.clip is not None:
            check_positive("clip", self.clip)
        if self.delta is not None:
            check_delta(self.delta)
        if self.clip_quantile is not None:
            check_in_range("clip_quantile", self.clip_quantile, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        if self.match_deployment is not None:
            from fedgen_debug.privacy.deployment import parse_spec

            if self.noise_multiplier is not None:
                raise ValueError("give either a noise multiplier or a deployment to match, not both: "
                                 "--match-deployment sets z.")
            parse_spec(self.match_deployment)   # a bad spec fails here, before anything is charged

    def saved_json(self, later_options: tuple[str, ...] = ()) -> dict:
        """This run's settings as saved: its asdict without the options added after the first runs while
        they are at their defaults (`clip_quantile`, and a run type's `later_options`), so runs from
        before an option resume with the config they saved."""
        out = dataclasses.asdict(self)
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        for name in ("clip_quantile", "match_deployment", *later_options):
            if out[name] == defaults[name]:
                del out[name]
        return out

    def override(self, preset: TrainingConfig, population: int) -> TrainingConfig:
        """`preset` with these settings; qN at most the population; the sampling's accounting."""
        from fedgen_debug.privacy.accounting import default_accounting

        dp = preset.dp
        clients = min(self.clients_per_round or dp.clients_per_round, population)
        if self.clients_per_round is not None and self.clients_per_round > population:
            logging.getLogger(__name__).warning(
                "clients per round %d is more than the %d users: every round takes all of them (ε is accounted so)",
                self.clients_per_round, population)
        rounds = self.rounds or preset.rounds
        noise, matched = dp.noise_multiplier if self.noise_multiplier is None else self.noise_multiplier, None
        if self.match_deployment is not None:
            from fedgen_debug.privacy.deployment import deployment_from_spec, matched_noise_multiplier, parse_spec

            rounds = self.rounds or parse_spec(self.match_deployment).get("rounds") or rounds
            deployment = deployment_from_spec(self.match_deployment, rounds=rounds)
            if deployment.rounds != rounds:
                raise ValueError(f"the deployment to match runs {deployment.rounds} rounds and this run {rounds}: the "
                                 "same noise on the mean means the same rounds (give --rounds, or drop rounds= from "
                                 "the deployment).")
            noise, matched = matched_noise_multiplier(deployment, clients), deployment.spec
        dp = dataclasses.replace(
            dp, clients_per_round=clients, noise_multiplier=noise, matched_deployment=matched,
            clip=dp.clip if self.clip is None else self.clip, accounting=default_accounting(self.sampling),
            clip_quantile=dp.clip_quantile if self.clip_quantile is None else self.clip_quantile)
        return dataclasses.replace(preset, rounds=rounds, dp=dp, sampling=self.sampling)


def check_public_init(init: str | None, data: str, modality: str) -> None:
    """`None`, or `public:SPEC` naming `modality` data other than the run's `data`; a clear error otherwise."""
    if init is None:
        return
    what = {"text": "text", "images": "images"}[modality]
    if not init.startswith(data_spec.PUBLIC_PREFIX):
        raise ValueError(f"init must be 'public:DATA_SPEC' (public stand-in {what} to pretrain on). Found {init!r}.")
    spec = data_spec.parse_data_spec(init[len(data_spec.PUBLIC_PREFIX):])
    if spec.modality != modality:
        raise ValueError(f"init: {'an LM' if modality == 'text' else 'a GAN'} pretrains on {what}. Found {init!r}.")
    if data_spec.user_namespace(spec) == data_spec.user_namespace(data) and \
            set(data_spec.client_ids(spec)) & set(data_spec.client_ids(data)):
        raise ValueError(f"init: {spec} holds users of the private data; pretraining must use other, public {what}.")
