"""`check-memorization` for LM runs: every canary's exposure, random-sampling rank and beam-search
extraction, the tables of Thakkar et al. 2021 (Tables 1/2) and Ramaswamy et al. 2020 (Table 4), and a
pass/fail against an exposure threshold.

For each canary `prefix | suffix` (`device.canary_specs`), with m random suffixes drawn uniformly from
the canary alphabet (the checker's own public randomness, `seed`):
- `rs_rank`: 1 + the references at least as likely as the canary's suffix after its prefix; 1 means
  "memorized" in RS terms (Thakkar: the least log-perplexity among 2M random suffixes);
- `exposure`: −log2 of the canary's quantile among the references (`exposure.exposure_interpolation`;
  at most log2(m + 1), ≈ 21 bits for 2M), and `exposure_extrapolated` from a skew-normal fit of the
  reference scores, which reads past it, up to log2 |R|;
- `bs_found`: the suffix is among the `beam_width` continuations a beam search finds from the prefix.
Control canaries (generated alike, never inserted) give the exposure of a canary the model never saw.

What is computed: the released model weights and the public canaries only, so the report is a release
like the samples (post-processing of DP outputs) and is written to `released/memorization.json`.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.device.canary_specs import RAMASWAMY, THAKKAR, Canary
from fedgen_debug.memorization.exposure import exposure_extrapolation, exposure_from_rank
from fedgen_debug.progress import progress
from fedgen_debug.runs import store
from fedgen_debug.validation import check_at_least, check_positive

logger = logging.getLogger(__name__)

# An unseen canary's exposure exceeds t bits with probability 2^-t: at 12 bits, a false "fail" among
# the 54 canaries of both default grids has probability ≈ 1.3%.
DEFAULT_MAX_EXPOSURE_BITS = 12.0
DEFAULT_REFERENCES = 2_000_000
# Reference scores kept for the skew-normal fit (it needs the shape, not all 2M).
EXTRAPOLATION_SAMPLE = 100_000


@dataclasses.dataclass(frozen=True)
class CheckConfig:
    references: int = DEFAULT_REFERENCES
    beam_width: int = 5
    max_exposure_bits: float = DEFAULT_MAX_EXPOSURE_BITS
    seed: int = 0

    def __post_init__(self):
        check_at_least("references", self.references, 3)
        check_at_least("beam_width", self.beam_width, 1)
        check_positive("max_exposure_bits", self.max_exposure_bits)


@dataclasses.dataclass(frozen=True)
class Encoding:
    """Model ids of a run's canaries: the prefix starts with the sequence's start symbol."""

    start_id: int
    alphabet_ids: np.ndarray
    symbol_id: dict

    def prefix(self, canary: Canary) -> list[int]:
        return [self.start_id] + [self.symbol_id[s] for s in canary.prefix]

    def suffix(self, canary: Canary) -> list[int]:
        return [self.symbol_id[s] for s in canary.suffix]


def check_canary(model, canary: Canary, encoding: Encoding, config: CheckConfig, log2_space: float) -> dict:
    from fedgen_debug.memorization import extraction  # TensorFlow: only for real work (the CLI's --help stays fast)

    rng = np.random.default_rng(np.random.SeedSequence(config.seed, spawn_key=(rng_streams.CANARY_REFERENCES, *canary.canary_id.encode())))
    prefix, suffix = encoding.prefix(canary), encoding.suffix(canary)
    ranked = extraction.random_sampling_rank(model, prefix, suffix, encoding.alphabet_ids, config.references, rng,
                                             keep_reference_sample=EXTRAPOLATION_SAMPLE)
    canary_bits = -ranked.canary_log_prob / math.log(2.0)
    reference_bits = -np.asarray(ranked.reference_sample) / math.log(2.0)
    # The rank among the references (ties against the canary) implies the exposure in the whole space.
    exposure = float(exposure_from_rank(ranked.rank, config.references)[0])
    found = extraction.beam_search_found(model, prefix, suffix, encoding.alphabet_ids, width=config.beam_width)
    return {"id": canary.canary_id, "inserted": canary.config is not None,
            "config": None if canary.config is None else canary.config.to_json(),
            "log_perplexity_bits": canary_bits, "rs_rank": int(ranked.rank), "exposure": exposure,
            # No canary can be exposed more than rank 1 in the whole space.
            "exposure_extrapolated": min(float(exposure_extrapolation([canary_bits], reference_bits)[0]), log2_space),
            "bs_found": bool(found)}


def thakkar_table(rows: list[dict]) -> list[dict]:
    """Per (p_u, p_e): canaries memorized by RS (rank 1) and found by BS, out of the total (Thakkar Tables 1/2)."""
    return _grouped(rows, THAKKAR, ("p_u", "p_e"),
                    lambda group: {"rs_memorized": sum(r["rs_rank"] == 1 for r in group),
                                   "bs_found": sum(r["bs_found"] for r in group)})


def ramaswamy_table(rows: list[dict]) -> list[dict]:
    """Per (n_u, n_e): each canary's RS rank and how many BS found (Ramaswamy Table 4)."""
    return _grouped(rows, RAMASWAMY, ("n_u", "n_e"),
                    lambda group: {"rs_ranks": [r["rs_rank"] for r in group],
                                   "bs_found": sum(r["bs_found"] for r in group)})


def _grouped(rows, design, keys, summarize) -> list[dict]:
    groups = {}
    for row in rows:
        if row["config"] is not None and row["config"]["design"] == design:
            groups.setdefault(tuple(row["config"][k] for k in keys), []).append(row)
    return [{**dict(zip(keys, point)), "canaries": len(group),
             "max_exposure": max(r["exposure"] for r in group), **summarize(group)}
            for point, group in sorted(groups.items())]


def verdict(rows: list[dict], max_exposure_bits: float) -> dict:
    over = [r["id"] for r in rows if r["inserted"] and r["exposure"] > max_exposure_bits]
    controls = [r["exposure"] for r in rows if not r["inserted"]]
    return {"passed": not over, "max_exposure_bits": max_exposure_bits, "over_threshold": over,
            "control_exposure_mean": float(np.mean(controls)) if controls else None,
            "control_exposure_max": float(np.max(controls)) if controls else None}


def check_canaries(model, canaries, encoding: Encoding, config: CheckConfig, log2_space: float) -> dict:
    rows = []
    for canary in progress(canaries, desc="canaries", unit="canary"):
        rows.append(check_canary(model, canary, encoding, config, log2_space))
        logger.info("%s: rank %d, exposure %.1f bits, beam search %s", canary.canary_id, rows[-1]["rs_rank"],
                    rows[-1]["exposure"], "found" if rows[-1]["bs_found"] else "not found")
    return {"references": config.references, "beam_width": config.beam_width, "log2_space": log2_space,
            "canaries": rows, "thakkar": thakkar_table(rows), "ramaswamy": ramaswamy_table(rows),
            "verdict": verdict(rows, config.max_exposure_bits)}


def check_lm_run(run_dir: str, config: CheckConfig = CheckConfig(), cross_client=None) -> dict:
    """Checks a finished LM run trained with `--canaries` and/or `--update-canaries`; writes and returns
    the report. `cross_client` (a `cross_client_lm.CrossClientConfig`): also the DP cross-client
    memorization ratios (word-LM)."""
    from fedgen_debug.training.lm_run import load_lm

    try:
        recorded = store.read_json(store.released(run_dir, store.CANARIES))
    except FileNotFoundError:
        recorded = None
    if recorded is None and not ((store.read_config(run_dir) or {}).get("lm") or {}).get("update_canaries"):
        raise FileNotFoundError(f"{run_dir}: no canaries in this run (train it with --canaries or --update-canaries).")
    model, vocab, run = load_lm(run_dir)
    report = {"run_dir": run_dir, "kind": run.kind, "spec": None, "canaries": [], "thakkar": [], "ramaswamy": [],
              "verdict": verdict([], config.max_exposure_bits)}
    if recorded is not None:
        report.update(check_canaries(model, _canaries(recorded), _encoding(recorded, vocab, run), config,
                                     math.log2(recorded["space_size"])), spec=recorded["spec"])
    if cross_client is not None:
        from fedgen_debug.memorization.cross_client_lm import cross_client_memorization

        report["cross_client"] = cross_client_memorization(run_dir, model, vocab, run, cross_client)
    report["privacy"] = store.read_json(store.released(run_dir, store.PRIVACY))
    if run.update_canaries:
        empirical = report["empirical_privacy"] = _lm_empirical_privacy(model, vocab, run, report["privacy"])
        # A (1 − α)-confidence lower bound above the accountant's ε means the accounting does not hold.
        broken = empirical["lower_bound"] > empirical["accountant_epsilon"]
        report["verdict"] = {**report["verdict"], "passed": report["verdict"]["passed"] and not broken,
                             "empirical_bound_exceeds_accountant": broken}
    store.write_json(store.released(run_dir, store.MEMORIZATION), report)
    return report


def _canaries(recorded: dict) -> tuple:
    return tuple(Canary.from_json(c) for c in recorded["canaries"])


def _encoding(recorded: dict, vocab, run) -> Encoding:
    from fedgen_debug.models.lm import BOW
    from fedgen_debug.device import lm_canaries

    symbols = sorted({s for c in _canaries(recorded) for s in c.prefix + c.suffix})
    alphabet = lm_canaries.alphabet(run.kind, vocab)
    if run.kind == "word":
        return Encoding(vocab.bos_id, np.array(vocab.ids(list(alphabet)), np.int64),
                        dict(zip(symbols, vocab.ids(symbols))))
    return Encoding(BOW, np.array([ord(s) for s in alphabet], np.int64), {s: ord(s) for s in symbols})


def _lm_empirical_privacy(model, vocab, run, privacy: dict) -> dict:
    """The update canaries' cosines with the released model delta; the initial weights are the model
    family's at the run's public seed (what the training process starts from)."""
    from fedgen_debug.memorization.empirical_check import empirical_privacy
    from fedgen_debug.models.lm import CHAR_VOCAB
    from fedgen_debug.training.lm_run import model_spec

    initial = model_spec(run, vocab.num_ids if run.kind == "word" else CHAR_VOCAB).keras_model_fn()
    initial.build((None, run.max_length))
    return empirical_privacy([w.numpy() for w in initial.trainable_variables],
                             [w.numpy() for w in model.trainable_variables], run.update_canaries, run.seed, privacy)
