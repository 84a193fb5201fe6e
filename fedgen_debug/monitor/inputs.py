"""The modeler's own inputs to a monitor (issue 57): the users' primary model and the LM auxiliaries'
vocabulary files, checked before the ledger is touched and kept in the monitor's released part.

A plan names them by path; the files are read when the monitor starts, not when a period needs them, so a
bad path or a model that breaks its contract (`models.primary`) is refused before anything is charged
(the ledger's population key included). A vocabulary file is copied once into the monitor's released
part (`released/vocabularies/AUXILIARY.txt`, public: the modeler's own) and every period's run reads that copy:
a word-LM warm-starts from period to period and needs the very same words, even if the modeler's file
changes later; a resumed monitor needs neither original. The primary model is passed to every period's
GAN run as `train-gan --primary` would be (each run keeps its own copy, as any run does).
"""

from __future__ import annotations

import logging
import os

from fedgen_debug.device import lm_data
from fedgen_debug.monitor.plan import Auxiliary, MonitorPlan
from fedgen_debug.runs import store

logger = logging.getLogger(__name__)


def vocabulary_copy(out_dir: str, auxiliary: Auxiliary) -> str:
    return store.released(out_dir, store.VOCABULARIES, f"{auxiliary.name}.txt")


def period_vocab(plan: MonitorPlan, auxiliary: Auxiliary, out_dir: str | None) -> str:
    """The vocabulary source an LM auxiliary's period runs use: the monitor's copy of a vocabulary file,
    else the plan's source (a public one or DP heavy hitters, which each period's run builds itself)."""
    source = plan.vocab_source(auxiliary)
    if out_dir is not None and source.startswith(lm_data.FILE_PREFIX):
        return lm_data.FILE_PREFIX + vocabulary_copy(os.path.abspath(out_dir), auxiliary)
    return source


def _vocabulary_files(plan: MonitorPlan, out_dir: str):
    """(auxiliary, its `file:` source, the monitor's copy) of each LM auxiliary whose vocabulary is a file
    the monitor has not copied yet."""
    for auxiliary in plan.auxiliaries:
        source = plan.vocab_source(auxiliary) if auxiliary.kind != "gan" else ""
        target = vocabulary_copy(out_dir, auxiliary)
        if source.startswith(lm_data.FILE_PREFIX) and not os.path.exists(target):
            yield auxiliary, source, target


def check_inputs(plan: MonitorPlan, out_dir: str) -> None:
    """Reads every file the plan names that the monitor has not copied yet: the vocabulary files (every
    check of `lm_data.file_vocabulary`) and the primary model (loaded and checked against its contract).
    Raises ValueError naming the input; touches nothing."""
    for auxiliary, source, _ in _vocabulary_files(plan, out_dir):
        try:
            lm_data.check_vocabulary_file(source)
        except ValueError as error:
            raise ValueError(f"auxiliaries: {auxiliary.name}'s vocab: {error}") from None
    if plan.primary is not None:
        from fedgen_debug.training.primary_cnn import check_primary

        check_primary(plan.primary, plan.primary_contract())


def install(plan: MonitorPlan, out_dir: str) -> None:
    """Copies each vocabulary file into the monitor's released part, once (a copy already there stays:
    the periods that ran used it)."""
    for auxiliary, source, target in _vocabulary_files(plan, out_dir):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        store.copy_public(source[len(lm_data.FILE_PREFIX):], target)
        logger.info("%s: vocabulary %s copied to %s", auxiliary.name, source, target)
