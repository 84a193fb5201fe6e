"""The bridge to a local TFF worker in a network namespace of its own (`tff_workers`), run as a script
(`python -I tff_forwarder.py LISTEN_FD WORKER_PID PORT SOCKET_PATH`, standard library only) inside the
worker's user and network namespaces.

It brings the namespace's loopback up, accepts connections on the Unix-domain socket it inherits
(`LISTEN_FD`, bound by the parent in a directory only its user can enter) and joins each to the
worker's `[::]:PORT`, which nothing outside the namespace can reach. It exits when the worker exits or
on SIGTERM, the parent-death signal it is started with, and then removes the socket and its directory
(the parent removes them too when it exits normally; a SIGKILLed parent cannot).
"""

import fcntl
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
UPSTREAM_TIMEOUT_S = 60.0   # the worker needs a few seconds before it listens
CHUNK = 1 << 20


def loopback_up() -> None:
    """A new network namespace's `lo` is down: the worker's port is unreachable even from inside."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                end.shutdown(how)
            except OSError:
                pass


def join(client: socket.socket, port: int) -> None:
    deadline = time.monotonic() + UPSTREAM_TIMEOUT_S
    while True:
        try:
            upstream = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            if time.monotonic() > deadline:
                client.close()
                return
            time.sleep(0.05)
    threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()


def accept_forever(listener: socket.socket, port: int) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=join, args=(client, port), daemon=True).start()


def remove_socket(path: str) -> None:
    for remove, target in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
        try:
            remove(target)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    listen_fd, worker_pid, port, path = int(argv[0]), int(argv[1]), int(argv[2]), argv[3]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        worker = os.pidfd_open(worker_pid)   # before anything else: the worker may already have exited
        loopback_up()
        listener = socket.socket(fileno=listen_fd)
        threading.Thread(target=accept_forever, args=(listener, port), daemon=True).start()
        select.select([worker], [], [])      # readable once the worker has exited
    finally:
        remove_socket(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
