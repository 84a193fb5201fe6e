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

`worker_binary` listens on `[::]:PORT` (compiled into TFF 0.87's binary; it has no address flag) without
TLS or authentication: anyone who can reach the port can run TensorFlow code on that machine and read
what it computes, the clients' data included. The local worker's port is random and short-lived; a
standalone worker must sit on a private network or behind a firewall, reached through an SSH tunnel.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time

logger = logging.getLogger(__name__)

WORKERS_ENV = "FEDGEN_DEBUG_WORKERS"
READY_TIMEOUT_S = 60.0
EXPOSURE_WARNING = ("TFF's worker_binary listens on all interfaces ([::]:{port}; TFF 0.87's binary has no address "
                    "flag) without TLS or authentication: whoever reaches port {port} can run TensorFlow code on "
                    "this machine and read the data it computes on. Keep the port closed to other machines "
                    "(firewall, private network) and reach it through an SSH tunnel (ssh -L).")
_lock = threading.Lock()
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


def start_worker(port: int) -> subprocess.Popen:
    """`worker_binary --port=PORT`, killed by the kernel when the calling thread dies (`setpriv
    --pdeathsig`). The caller owns the process (stop it with SIGINT, as TFF does)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise RuntimeError("util-linux's setpriv is missing (apt install util-linux): it starts TFF's worker "
                           "with a parent-death signal, so that no worker outlives a killed run.")
    argv = [setpriv, "--pdeathsig", "KILL", "--", worker_binary(), f"--port={port}"]
    return subprocess.Popen(argv)


def wait_ready(address: str, timeout_s: float = READY_TIMEOUT_S, process: subprocess.Popen | None = None):
    """A TFF executor stub to `address`, once the worker answers (or an error naming it)."""
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
    """Starts the local worker on first use (as TFF's ServiceManager) and again if it died."""

    def __init__(self):
        self.process, self.stub = None, None
        self.lock = threading.Lock()

    def get_stub(self):
        with self.lock:
            if self.stub is not None and self.process.poll() is None:
                return self.stub
            import portpicker

            port = portpicker.pick_unused_port()
            self.process = start_worker(port)
            logger.debug("started TFF worker %d on port %d", self.process.pid, port)
            self.stub = wait_ready(f"localhost:{port}", process=self.process)
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
