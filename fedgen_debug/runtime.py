"""TFF execution-context hygiene.

TFF's local C++ execution context starts a `worker_binary` subprocess the first time a federated
computation runs (ours, `tff_workers.local_context`, starts it with a parent-death signal, so even a
SIGKILL cannot orphan it; TFF's own default context, which code outside fedgen-debug may use, does
not). TFF only stops it from a `__del__` that rarely runs at interpreter exit, so the worker outlives
Python and keeps the inherited stdout/stderr pipes open: `fedgen-debug ... | tail` and CI then hang.
Every entry point that may run a TFF computation calls `install_shutdown_hooks()` (idempotent):
`shutdown()` then runs at exit, on SIGTERM/SIGHUP (turned into SystemExit) and on Ctrl-C
(KeyboardInterrupt unwinds to the same exit hooks).

`shutdown()` first drops TFF's execution context while the interpreter is intact, so TFF's own
service manager stops its worker; then it stops any worker child still alive, found through /proc
rather than TFF internals, so this keeps working if TFF changes how it holds the process handle.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
import time

logger = logging.getLogger(__name__)

WORKER_BINARY_NAME = "worker_binary"
WORKER_EXIT_TIMEOUT_S = 10.0
_install_lock = threading.Lock()
_installed = False


def _read_stat_ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: the ppid follows the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0", 1)[0]
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    # A zombie (state Z) has already exited; it only waits to be reaped.
    return os.path.basename(argv0).decode(errors="replace") == WORKER_BINARY_NAME and state != b"Z"


def worker_processes(parent_pid: int | None = None) -> list[int]:
    """PIDs of live TFF worker_binary processes; children of `parent_pid` if given."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if parent_pid is not None and _read_stat_ppid(pid) != parent_pid:
            continue
        if _is_worker(pid):
            pids.append(pid)
    return pids


def shutdown_workers(timeout_s: float = 5.0) -> list[int]:
    """Stops the worker_binary children of this process. Returns the PIDs that were stopped.

    SIGINT first (what TFF itself sends), SIGKILL after `timeout_s`. Zombies are reaped so that no
    `<defunct>` entry lingers.
    """
    pids = worker_processes(os.getpid())
    if not pids:
        return []
    for pid in pids:
        _signal(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_is_worker(p) for p in pids):
        _reap(pids)
        time.sleep(0.05)
    for pid in pids:
        if _is_worker(pid):
            logger.warning("TFF worker %d ignored SIGINT; killing it.", pid)
            _signal(pid, signal.SIGKILL)
    _reap(pids, block=True)
    logger.debug("Stopped TFF workers %s", pids)
    return pids


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pids: list[int], block: bool = False) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pass  # Already reaped (e.g. by TFF's own Popen.wait).


@contextlib.contextmanager
def killing_workers_after(timeout_s: float):
    """SIGKILLs this process's workers if the body has not finished after `timeout_s`.

    TFF's ServiceManager.__del__ waits for its worker without a timeout after sending SIGINT; a worker
    that ignores SIGINT (seen after long runs under load) would hang the exit forever.
    """
    parent = os.getpid()

    def kill_workers():
        for pid in worker_processes(parent):
            logger.warning("TFF worker %d did not stop within %.0f s; killing it.", pid, timeout_s)
            _signal(pid, signal.SIGKILL)

    watchdog = threading.Timer(timeout_s, kill_workers)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()


def shutdown(restore_context: bool = False) -> list[int]:
    """Shuts TFF's execution context down and stops every worker_binary child of this process.

    With `restore_context`, installs a fresh local context afterwards (`tff_workers.use_context`) so
    that this process can run federated computations again (it starts a new worker on first use).
    Returns the PIDs of the workers that had to be stopped by signal (not those TFF stopped itself).
    """
    tff = sys.modules.get("tensorflow_federated")
    if tff is not None:
        # Pinned TFF 0.87 exposes this only internally; it installs a context that raises on use.
        from tensorflow_federated.python.core.impl.context_stack import set_default_context

        with killing_workers_after(WORKER_EXIT_TIMEOUT_S):
            set_default_context.set_no_default_context()
            gc.collect()  # runs TFF's ServiceManager.__del__, which SIGINTs and waits for its worker
    stopped = shutdown_workers()
    if tff is not None:
        from fedgen_debug import tff_workers

        tff_workers.forget()
        if restore_context:
            tff_workers.use_context()
    return stopped


def _exit_on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
    raise SystemExit(128 + signum)


def install_shutdown_hooks() -> None:
    """Makes sure no TFF worker_binary outlives this process (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        atexit.register(shutdown)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(sig) in (signal.SIG_DFL, None):
                    signal.signal(sig, _exit_on_signal)
        _installed = True
