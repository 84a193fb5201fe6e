"""Training runs side by side, each in a process of its own (the demo's LM pairs).

Why processes: a demo LM round is launch-bound, and one process keeps about 1.3 of 2 cores busy however
many client threads it runs (two LM runs on threads of one process took twice as long each, 5.1 s a
round against 2.5 s alone), while two processes ran two char-LMs at 3.4 s a round each: 1.28× the
throughput on 2 EPYC cores, more where there are more cores. A GAN round already keeps 2 cores busy
(two at once took 2.66 s a call each against 1.33 s alone), so the GAN pairs stay one after another.

Each run trains exactly as alone: its own run directory, lock, secret and ledger charge (the ledger
locks its file across processes). The children are spawned (TensorFlow cannot be forked), log at the
parent's level, draw their progress bars on rows of their own, and die with the parent (the kernel's
PR_SET_PDEATHSIG: a killed demo leaves no run training on).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import logging
import multiprocessing
import os
import signal
import sys

from fedgen_debug.progress import PROGRESS_ROW_ENV

_PR_SET_PDEATHSIG = 1


def run_side_by_side(calls: list[tuple], processes: int) -> list:
    """`[fn(*args) for fn, *args in calls]`, at most `processes` at a time, each in a spawned process of
    its own when `processes` > 1 and there is more than one call (`fn` must be importable, `args` and
    the results picklable). Results come back in call order; the first call's error is raised once every
    call has ended. Call k draws its progress bars on terminal row k mod `processes`."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1. Found {processes}.")
    if processes == 1 or len(calls) < 2:
        return [fn(*args) for fn, *args in calls]
    with concurrent.futures.ProcessPoolExecutor(
            min(processes, len(calls)), mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1,
            initializer=_child_setup, initargs=(os.getpid(), logging.getLogger().level)) as pool:
        futures = [pool.submit(_on_row, k % processes, fn, *args) for k, (fn, *args) in enumerate(calls)]
    return [future.result() for future in futures]


def _child_setup(parent: int, log_level: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            logging.getLogger(__name__).warning("could not tie this run's process to the parent's life (errno %d)",
                                                ctypes.get_errno())
        if os.getppid() != parent:  # the parent died before the tie was made
            os._exit(1)
    logging.basicConfig(level=log_level, format="%(levelname)s %(name)s: %(message)s")


def _on_row(row: int, fn, *args):
    os.environ[PROGRESS_ROW_ENV] = str(row)  # the process is this call's alone (max_tasks_per_child=1)
    return fn(*args)
