"""TFF workers that never outlive this process, and TFF's multi-worker runtime (issue 16).

TFF's own local context starts `worker_binary` itself and stops it only from a `__del__`: when Python is
SIGKILLed the worker is reparented to PID 1 and keeps its port (measured). This module starts the
worker itself under util-linux `setpriv --pdeathsig KILL` (the kernel's PR_SET_PDEATHSIG, set in the
child before it execs the worker), so the kernel kills it when the thread that started it dies, however
Python ends, and hands TFF a gRPC channel to it: the context TFF builds in
`create_sync_local_cpp_execution_context`, with our process behind the stub.

With `$FEDGEN_DEBUG_WORKERS` (the CLI's `--workers HOST:PORT,...`) the rounds run on running workers
instead (`fedgen-debug worker --port P` starts one), through TFF's mergeable execution context: each
round's clients are split across the workers, each worker aggregates its share (`up to merge`), and the
Python side merges the partial aggregates and runs the server part (`after merge`). The DP query's noise
is added after the merge, once, with the run secret's seed: the sum it noises is the same as on one worker.

`worker_binary` listens on `[::]:PORT` (compiled into TFF 0.87's binary: its only flags are `--port`,
`--grpc_max_message_length_megabytes` and `--max_concurrent_computation_calls`) without TLS or
authentication: anyone who can reach the port can run TensorFlow code on that machine and read what it
computes, the clients' data included. So the local worker runs in a network namespace of its own
(`unshare --net --map-root-user`: no privilege needed), where `[::]` is only that namespace's loopback;
this process reaches it through a Unix-domain socket in a directory only its user can enter, bridged
into the namespace by `tff_forwarder` (started with `nsenter` into the worker's namespaces, also with a
parent-death signal, SIGTERM, on which it removes the socket; it exits when the worker does). The worker
is still this process's child, so `runtime` finds and stops it as before. Where the kernel allows no
user namespace (some containers), the worker listens on all interfaces as TFF starts it, and a warning
says so once. A standalone worker (`fedgen-debug worker`) must be reachable: it must sit on a private
network or behind a firewall, reached through an SSH tunnel.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref

logger = logging.getLogger(__name__)

WORKERS_ENV = "FEDGEN_DEBUG_WORKERS"
READY_TIMEOUT_S = 60.0
EXPOSURE_WARNING = ("TFF's worker_binary listens on all interfaces ([::]:{port}; TFF 0.87's binary has no address "
                    "flag) without TLS or authentication: whoever reaches port {port} can run TensorFlow code on "
                    "this machine and read the data it computes on. Keep the port closed to other machines "
                    "(firewall, private network) and reach it through an SSH tunnel (ssh -L).")
LOCAL_EXPOSURE_WARNING = ("TFF's local worker listens on all interfaces ([::]:{port}) without TLS or authentication: "
                          "this machine allows no user namespace to hide it in ({reason}). Whoever reaches port "
                          "{port} can run TensorFlow code here and read the clients' data: firewall it, or use "
                          "--backend tf.")
_lock = threading.Lock()
_warned_local_exposure = False
_installed = None   # (worker addresses, the context) this module made TFF's default; None: none or dropped


def worker_binary() -> str:
    import tensorflow_federated as tff

    path = os.path.join(os.path.dirname(tff.__file__), "data", "worker_binary")
    if not os.path.isfile(path):
        raise RuntimeError(f"TFF's worker_binary is missing at {path}; reinstall tensorflow-federated.")
    return path


def parse_workers(text: str | None) -> tuple[str, ...]:
    """"host:port,host:port" → ("host:port", ...); empty or None → ()."""
    if not text or not text.strip():
        return ()
    out = []
    for address in (a.strip() for a in text.split(",")):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"--workers takes HOST:PORT[,HOST:PORT...] (port 1-65535). Found {address!r}.")
        out.append(address)
    if len(set(out)) != len(out):
        raise ValueError(f"--workers lists a worker twice: {text!r}.")
    return tuple(out)


def _setpriv() -> str:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise RuntimeError("util-linux's setpriv is missing (apt install util-linux): it starts TFF's worker "
                           "with a parent-death signal, so that no worker outlives a killed run.")
    return setpriv


def start_worker(port: int) -> subprocess.Popen:
    """`worker_binary --port=PORT`, killed by the kernel when the calling thread dies (`setpriv
    --pdeathsig`). The caller owns the process (stop it with SIGINT, as TFF does)."""
    return subprocess.Popen([_setpriv(), "--pdeathsig", "KILL", "--", worker_binary(), f"--port={port}"])


@functools.lru_cache(maxsize=1)
def namespace_unavailable() -> str | None:
    """Why no private network namespace can be made here (None: it can). Tried once a process."""
    tools = {name: shutil.which(name) for name in ("unshare", "nsenter")}
    if None in tools.values():
        return f"util-linux's {', '.join(n for n, p in tools.items() if p is None)} missing"
    try:
        done = subprocess.run([tools["unshare"], "--net", "--map-root-user", "--", sys.executable, "-I", "-c", ""],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare failed: {e}"
    return None if done.returncode == 0 else f"unshare: {done.stderr.strip() or done.returncode}"


class IsolatedWorker:
    """`worker_binary` in a user and network namespace of its own, reached at `address` (`unix:PATH`).

    The worker is started as `setpriv --pdeathsig KILL -- unshare --net --map-root-user -- worker_binary`,
    one process through three execs, so it is this process's child and, being the process that makes the
    namespace, can never listen outside it. The bridge (`tff_forwarder`) joins the namespace only after
    the worker runs (before that, `nsenter` would join this process's own namespace: the bridge would
    then find no worker, never the reverse)."""

    def __init__(self, port: int):
        self.directory = tempfile.mkdtemp(prefix="fedgen-debug-tff-")   # mode 0700: only this user enters
        self._remove_directory = weakref.finalize(self, shutil.rmtree, self.directory, True)
        path = os.path.join(self.directory, "worker.sock")
        self.address = f"unix:{path}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(64)
            self.process = subprocess.Popen([_setpriv(), "--pdeathsig", "KILL", "--", shutil.which("unshare"),
                                             "--net", "--map-root-user", "--", worker_binary(), f"--port={port}"])
            try:
                self._wait_until_worker_runs()
            except RuntimeError:
                self.process.kill()
                self.process.wait()
                raise
            forwarder = os.path.join(os.path.dirname(__file__), "tff_forwarder.py")
            self.forwarder = subprocess.Popen(
                [_setpriv(), "--pdeathsig", "TERM", "--", shutil.which("nsenter"), f"--target={self.process.pid}",
                 "--user", "--net", "--preserve-credentials", "--", sys.executable, "-I", forwarder,
                 str(listener.fileno()), str(self.process.pid), str(port), path], pass_fds=[listener.fileno()])
        # This process's copy of the listener is closed: with the bridge gone, connecting fails at once.

    def _wait_until_worker_runs(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        binary = worker_binary().encode()
        while True:
            try:
                with open(f"/proc/{self.process.pid}/cmdline", "rb") as f:
                    if f.read().split(b"\0", 1)[0] == binary:
                        return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"TFF's worker exited with {self.process.returncode} before it ran "
                                   "(unshare --net --map-root-user failed?).")
            if time.monotonic() > deadline:
                raise RuntimeError(f"TFF's worker did not start within {timeout_s:.0f} s.")
            time.sleep(0.01)

    def poll(self) -> int | None:
        """None while the worker and its bridge run; else the exit status of the first one found stopped."""
        for process in (self.process, self.forwarder):
            if process.poll() is not None:
                return process.returncode
        return None

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def stop(self) -> None:
        """Kills what still runs of the two (after one of them died) and reaps both."""
        for process in (self.process, self.forwarder):
            if process.poll() is None:
                process.kill()
            process.wait()


def _warn_local_exposure(port: int, reason: str) -> None:
    global _warned_local_exposure
    with _lock:
        if _warned_local_exposure:
            return
        _warned_local_exposure = True
    logger.warning(LOCAL_EXPOSURE_WARNING.format(port=port, reason=reason))


def wait_ready(address: str, timeout_s: float = READY_TIMEOUT_S, process: subprocess.Popen | None = None):
    """A TFF executor stub to `address`, once the worker answers (or an error naming it). `process`: the
    worker's (a Popen or an `IsolatedWorker`), to stop waiting if it exits."""
    import grpc
    from tensorflow_federated.python.core.impl.executors import remote_executor_grpc_stub

    channel = grpc.insecure_channel(address, [("grpc.max_message_length", 2 * 10**9),
                                              ("grpc.max_receive_message_length", 2 * 10**9),
                                              ("grpc.max_send_message_length", 2 * 10**9)])
    stub = remote_executor_grpc_stub.RemoteExecutorGrpcStub(channel)
    deadline = time.monotonic() + timeout_s
    while not stub.is_ready:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"TFF's worker at {address} exited with {process.returncode} before it was ready.")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no TFF worker answered at {address} within {timeout_s:.0f} s "
                               "(is `fedgen-debug worker --port PORT` running there?).")
        time.sleep(0.2)
    return stub


def _executor_factory(get_stub):
    from tensorflow_federated.python.core.impl.executor_stacks import python_executor_stacks
    from tensorflow_federated.python.core.impl.executors import remote_executor
    from tensorflow_federated.python.core.impl.types import placements

    def stack_fn(cardinalities):
        if cardinalities.get(placements.CLIENTS) is None:   # TFF's local default: computations without clients
            cardinalities[placements.CLIENTS] = 0
        executor = remote_executor.RemoteExecutor(get_stub())
        executor.set_cardinalities(cardinalities)
        return executor

    return python_executor_stacks.ResourceManagingExecutorFactory(executor_stack_fn=stack_fn)


def _context_kwargs():
    from tensorflow_federated.python.core.backends.native import compiler
    from tensorflow_federated.python.core.environments.tensorflow_frontend import tensorflow_computation

    return dict(compiler_fn=compiler.desugar_and_transform_to_native,
                transform_args=tensorflow_computation.transform_args,
                transform_result=tensorflow_computation.transform_result)


class _LocalWorker:
    """Starts the local worker on first use (as TFF's ServiceManager) and again if it died: in a network
    namespace of its own (`IsolatedWorker`), or, where none can be made, on all interfaces with a
    warning."""

    def __init__(self):
        self.worker, self.stub = None, None
        self.lock = threading.Lock()

    def get_stub(self):
        with self.lock:
            if self.stub is not None and self.worker.poll() is None:
                return self.stub
            if isinstance(self.worker, IsolatedWorker):
                self.worker.stop()
            import portpicker

            port = portpicker.pick_unused_port()   # free here too: a probe from outside finds nothing else
            reason = namespace_unavailable()
            if reason is None:
                self.worker = IsolatedWorker(port)
                address, process = self.worker.address, self.worker.process
            else:
                _warn_local_exposure(port, reason)
                self.worker = process = start_worker(port)
                address = f"localhost:{port}"
            logger.debug("started TFF worker %d at %s", process.pid, address)
            self.stub = wait_ready(address, process=self.worker)
            return self.stub


def local_context():
    """A sync TFF context on a local worker that dies with this process."""
    from tensorflow_federated.python.core.impl.execution_contexts import sync_execution_context

    return sync_execution_context.SyncExecutionContext(executor_fn=_executor_factory(_LocalWorker().get_stub),
                                                       **_context_kwargs())


def multi_worker_context(addresses: tuple[str, ...]):
    """TFF's mergeable context over running workers (`fedgen-debug worker`), one subround each."""
    import tensorflow_federated as tff
    from tensorflow_federated.python.core.impl.execution_contexts import async_execution_context

    contexts = []
    for address in addresses:
        stub = wait_ready(address)
        contexts.append(async_execution_context.AsyncExecutionContext(
            executor_fn=_executor_factory(lambda stub=stub: stub), **_context_kwargs()))
    return tff.backends.native.create_mergeable_comp_execution_context(contexts)


def use_context(workers: tuple[str, ...] | None = None):
    """Makes this module's context TFF's default: on the workers given, else `$FEDGEN_DEBUG_WORKERS`'s,
    else on an orphan-proof local worker. Without `workers`, the one installed before is kept while it
    is TFF's default. Returns it."""
    global _installed
    from tensorflow_federated.python.core.impl.context_stack import context_stack_impl

    with _lock:
        if _installed is not None and context_stack_impl.context_stack.current is _installed[1] \
                and (workers is None or tuple(workers) == _installed[0]):
            return _installed[1]
    addresses = tuple(workers) if workers is not None else parse_workers(os.environ.get(WORKERS_ENV))
    context = multi_worker_context(addresses) if addresses else local_context()
    if addresses:
        logger.info("TFF rounds run on %d worker(s): %s", len(addresses), ", ".join(addresses))
    with _lock:
        context_stack_impl.context_stack.set_default_context(context)
        _installed = (addresses, context)
    return context


def forget() -> None:
    """After TFF's default context was dropped (runtime.shutdown): the next `use_context` installs anew."""
    global _installed
    with _lock:
        _installed = None
