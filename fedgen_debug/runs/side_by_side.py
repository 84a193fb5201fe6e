"""Training runs side by side, each in a process of its own (the demo's LM and GAN runs).

Why processes: one process keeps only part of 2 cores busy on a demo LM round on client threads,
however many it runs (two LM runs on threads of one process took twice as long each), while two
processes running two char-LMs had more throughput, more where there are more cores; the vectorized
char-LM (`training.vectorized_lm`) gains less, but gains. The demo's GAN rounds gain too, though a
large one keeps 2 cores busy: its low- and high-accuracy GANs side by side had more throughput than
one after the other (the high GAN's rounds are small: few of its sampled users qualify).

Each worker runs TensorFlow's ops on one core's share of threads (`intra_op_threads`: TF's
intra-op pool of cores ÷ processes, set through `TF_NUM_INTRAOP_THREADS` unless the user set it;
ops still run two at a time on the inter-op pool). With a pool of 2 threads in each of 2 processes on
2 cores, the processes' threads took turns on the cores: the char-LMs side by side ran faster with 1
thread each, the word-LMs a little, the GANs within the machine's drift (alone, the low GAN's round
took as long either way: its parallelism is between ops, not within them). Every timing, and the
commands that measured them (`benchmarks/lm_round.py`, `benchmarks/gan_round.py`, two at once), is in
docs/performance.md.

Each run trains exactly as alone: its own run directory, lock, secret and ledger charge (the ledger
locks its file across processes). The workers are spawned (TensorFlow cannot be forked), log at the
parent's level and as the CLI does (`log_setup`: to stderr, third-party noise quieted), draw their progress bars on rows of their own, and die with the parent (the kernel's
PR_SET_PDEATHSIG: a killed demo leaves no run training on). A worker takes the next call when it is
free and keeps its imports and in-process caches between calls: the demo's char- and word-LM of the
same users import TensorFlow and build the public vocabulary once a worker (the word runs start in
seconds), and the parent analyses the char pair while the word pair trains.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import logging
import multiprocessing
import os
import signal
import sys

from fedgen_debug import log_setup
from fedgen_debug.progress import PROGRESS_ROW_ENV

_PR_SET_PDEATHSIG = 1
INTRA_OP_THREADS_ENV = "TF_NUM_INTRAOP_THREADS"


class SideBySide:
    """`with SideBySide(processes) as workers: future = workers.submit(fn, *args)`: calls start in
    submission order on the first free of `processes` spawned workers, which live for the `with` block
    (`fn` must be importable, `args` and results picklable). With one process each call runs here, when
    submitted, and an error is raised at once. Leaving the block waits for every call; leaving it by an
    error cancels the calls not yet handed to a worker (running ones end with this process)."""

    def __init__(self, processes: int):
        if processes < 1:
            raise ValueError(f"processes must be >= 1. Found {processes}.")
        self._processes, self._pool = processes, None

    def __enter__(self) -> "SideBySide":
        if self._processes > 1:
            context = multiprocessing.get_context("spawn")
            rows = context.Queue()
            for row in range(1, self._processes + 1):   # row 0: this process's bars (data, analyses)
                rows.put(row)
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self._processes, mp_context=context, initializer=_child_setup,
                initargs=(os.getpid(), logging.getLogger().level, rows, intra_op_threads(self._processes)))
        return self

    @property
    def in_process(self) -> bool:
        """Whether calls run here, when submitted (one process)."""
        return self._processes == 1

    def submit(self, fn, *args) -> concurrent.futures.Future:
        if self._pool is not None:
            return self._pool.submit(fn, *args)
        future = concurrent.futures.Future()
        future.set_result(fn(*args))
        return future

    def __exit__(self, kind, error, traceback) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=error is None, cancel_futures=error is not None)


def run_side_by_side(calls: list[tuple], processes: int) -> list:
    """`[fn(*args) for fn, *args in calls]`, at most `processes` at a time on `SideBySide` workers (here,
    one after another, when `processes` is 1 or there is one call). Results come back in call order; the
    first call's error is raised once every call has ended."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1. Found {processes}.")
    with SideBySide(min(processes, len(calls)) or 1) as workers:
        futures = [workers.submit(fn, *args) for fn, *args in calls]
        concurrent.futures.wait(futures)
    return [future.result() for future in futures]


def intra_op_threads(processes: int) -> int:
    """TensorFlow's intra-op threads for each of `processes` workers: this process's cores ÷ processes, at
    least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // processes)


def _child_setup(parent: int, log_level: int, rows, tf_threads: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            logging.getLogger(__name__).warning("could not tie this run's process to the parent's life (errno %d)",
                                                ctypes.get_errno())
        if os.getppid() != parent:  # the parent died before the tie was made
            os._exit(1)
    log_setup.configure(log_level)   # as the parent's CLI: reports print ε, logs add to them
    os.environ[PROGRESS_ROW_ENV] = str(rows.get())  # the worker's terminal row, for every call it runs
    # Read by TensorFlow when it makes its thread pools, at its first op in this process; a user's own
    # setting wins.
    os.environ.setdefault(INTRA_OP_THREADS_ENV, str(tf_threads))
