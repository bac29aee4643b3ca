"""A warm fork server: every job of a local study starts with torch, Lightning
and the analysis stack already imported.

A `scalestudy` command costs 5-10 s of imports before its first step (torch,
then Lightning, which pulls in torch._dynamo and scipy); a study's cells train
for seconds each, so half its CPU time went into start-up. The workflow starts
one server per Snakemake run (`start`, from the Snakefile's `onstart`); it
imports everything once and then forks a child per job, so each job is still
its own process (own seed, own threads, a crash takes only itself) and still one
Snakemake job per cell (one record per cell, a changed cell reruns alone).

The job's command line stays `scalestudy train ...`: the `scalestudy` client
finds the server through $SCALESTUDY_WARM_SOCKET, passes its argv, working
directory, environment and its stdin/stdout/stderr (so the rule's `> {log}`
redirection holds), forwards the signals it receives (SIGTERM, SIGINT, SIGUSR1,
...) to the child and exits with the child's code. The child dies with its
client: if the client is killed, the child's connection closes and it exits.
The server exits when the Snakemake process that started it is gone. Without a
server (a cluster job, a shell) the client runs the command in its own process.
Set SCALESTUDY_WARM=0 to never start one.

This is the idea of multiprocessing's "forkserver" start method, across
processes: the server forks only from its single thread, before any torch
kernel has run (an intra-op thread pool does not survive a fork).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SOCKET_ENV = "SCALESTUDY_WARM_SOCKET"
DISABLE_ENV = "SCALESTUDY_WARM"
# Imported once by the server, so that no job pays for them.
PRELOAD = ("torch", "lightning", "scalestudy.training.task", "scalestudy.training.pretrain",
           "scalestudy.tasks", "scalestudy.analysis.fits", "scalestudy.analysis.figures.draw",
           "scalestudy.analysis.tables", "scalestudy.analysis.claims", "scalestudy.records",
           "scalestudy.commands")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_HEADER = struct.Struct("!Q")


# --- client -------------------------------------------------------------------------

def _connect() -> socket.socket | None:
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def run_in_server(argv: list[str]) -> int | None:
    """Run `scalestudy argv` in a child of the warm server and return its exit
    code; None when there is no server to run it (run it here instead)."""
    sock = _connect()
    if sock is None:
        return None
    body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    try:
        socket.send_fds(sock, [_HEADER.pack(len(body))], [0, 1, 2])
        sock.sendall(body)
        reply = sock.makefile("r")
        first = reply.readline()
    except OSError:
        first = ""
    if not first.startswith("pid "):  # the server went away before forking
        sock.close()
        return None
    child = int(first.split()[1])

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    last = reply.readline()
    sock.close()
    if last.startswith("exit "):
        return int(last.split()[1])
    return 1  # the child died without reporting (killed, or crashed hard)


# --- server -------------------------------------------------------------------------

def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    header, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 3)
    (length,) = _HEADER.unpack(header)
    body = bytearray()
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ConnectionError("client closed the connection mid-request")
        body += chunk
    return json.loads(body), fds


def _die_with_client(conn: socket.socket) -> None:
    """The client sends nothing after its request: end of stream means it died."""
    def watch():
        with contextlib.suppress(OSError):
            while conn.recv(1):
                pass
        os._exit(143)

    threading.Thread(target=watch, daemon=True).start()


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become the client's process, run the command, report."""
    code = 1
    try:
        for signum in (*FORWARDED, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.pop(SOCKET_ENV, None)  # this process runs the command itself
        sys.argv = ["scalestudy", *request["argv"]]
        # Lightning starts a DDP run's other ranks as `python -m <the module of
        # __main__> argv`: the `scalestudy` command's, not this server's.
        sys.modules["__main__"].__spec__ = importlib.util.find_spec("scalestudy.cli")
        conn.sendall(f"pid {os.getpid()}\n".encode())
        _die_with_client(conn)
        from .commands import run_command

        code = run_command(request["argv"])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # report the error in the job's log, as the plain command would
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code}\n".encode())
        os._exit(code)


def serve(path: str, parent: int) -> None:
    """Accept jobs on the Unix socket `path` until process `parent` is gone."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)  # clients queue here while the imports below run
    for name in PRELOAD:
        importlib.import_module(name)
    sock.settimeout(1.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    while os.getppid() == parent:
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError):
            conn.close()
            continue
        if os.fork() == 0:
            sock.close()
            _child(conn, request, fds)
        for fd in fds:
            os.close(fd)
        conn.close()


def start() -> subprocess.Popen | None:
    """Start a server for this process's jobs and point them at it (the
    environment variable the `scalestudy` client reads); stopped at exit."""
    if os.environ.get(DISABLE_ENV) == "0" or os.environ.get(SOCKET_ENV):
        return None
    path = str(Path(tempfile.mkdtemp(prefix="scalestudy-")) / "warm.sock")
    server = subprocess.Popen(
        [sys.executable, "-m", "scalestudy.warm", path, str(os.getpid())],
        stdin=subprocess.DEVNULL, start_new_session=True,
    )

    def stop():
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=5)
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.rmdir(os.path.dirname(path))

    atexit.register(stop)
    for _ in range(200):  # bound within milliseconds; the imports come after
        if os.path.exists(path) or server.poll() is not None:
            break
        time.sleep(0.05)
    os.environ[SOCKET_ENV] = path
    return server


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
