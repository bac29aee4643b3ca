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
The server exits when the Snakemake process that started it (its owner,
$SCALESTUDY_WARM_OWNER) is gone. Without a server (a cluster job, a shell) the
client runs the command in its own process. Set SCALESTUDY_WARM=0 to never
start one.

A server that dies mid-study (SIGKILL: the kernel's OOM killer) is restarted by
the next client that finds it gone, at the same socket path (the jobs'
environment, Snakemake's, cannot change): under a lock beside the socket, so
that of the clients that find it gone at once one starts it and the others
connect to it; once per client, which otherwise runs its command itself. The
restarted server is detached from that job (its own session, its output in
warm.log beside the socket) and, like the first, exits with its owner.

This is the idea of multiprocessing's "forkserver" start method, across
processes: the server forks only from its single thread, before any torch
kernel has run (an intra-op thread pool does not survive a fork).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .. import plugins

SOCKET_ENV = "SCALESTUDY_WARM_SOCKET"
OWNER_ENV = "SCALESTUDY_WARM_OWNER"
DISABLE_ENV = "SCALESTUDY_WARM"
# Imported once by the server, so that no job pays for them.
PRELOAD = ("torch", "lightning", "scalestudy.training.task_run", "scalestudy.training.pretrain",
           "scalestudy.tasks", "scalestudy.analysis.fits", "scalestudy.analysis.figures.draw",
           "scalestudy.analysis.tables", "scalestudy.analysis.claims", "scalestudy.records",
           "scalestudy.cli.parser")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_HEADER = struct.Struct("!Q")


# --- client -------------------------------------------------------------------------

def _try_connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _spawn(path: str, owner: int) -> subprocess.Popen:
    """A server on `path` for the jobs of process `owner`, in its own session
    (no job's process group or log holds it)."""
    with open(f"{path}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "scalestudy.cli.fork_server", path, str(owner)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)


def _wait_bound(path: str, server: subprocess.Popen) -> None:
    for _ in range(200):  # bound within milliseconds; the imports come after
        if os.path.exists(path) or server.poll() is not None:
            return
        time.sleep(0.05)


def _restart(path: str) -> socket.socket | None:
    """Start the study's server again at `path` (it died) and connect to it;
    None when its owner is gone too, or the new one does not come up."""
    owner = os.environ.get(OWNER_ENV)
    if not owner or not _alive(int(owner)) or not os.path.isdir(os.path.dirname(path)):
        return None
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one restarter; the others wait, then connect
        sock = _try_connect(path)
        if sock is not None:
            return sock
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # the dead server's socket: bind refuses a used path
        server = _spawn(path, int(owner))
        _wait_bound(path, server)
        print(f"scalestudy: the warm server was gone; started another (pid {server.pid})",
              file=sys.stderr, flush=True)
    return _try_connect(path)


def _connect() -> socket.socket | None:
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return None
    return _try_connect(path) or _restart(path)


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
        from .parser import run_command

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


def serve(path: str, owner: int) -> None:
    """Accept jobs on the Unix socket `path` until process `owner` is gone."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)  # clients queue here while the imports below run
    with contextlib.suppress(OSError):  # for the owner's exit to stop a restarted one
        Path(f"{path}.pid").write_text(f"{os.getpid()}\n")
    for name in PRELOAD:
        importlib.import_module(name)
    with contextlib.suppress(ValueError):  # a plugin that fails says so in its job
        plugins.from_environment()
    sock.settimeout(1.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    while _alive(owner):
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
    server = _spawn(path, os.getpid())

    def stop():
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=5)
        with contextlib.suppress(OSError, ValueError):  # a restarted one (its pid file)
            restarted = int(Path(f"{path}.pid").read_text())
            if restarted != server.pid:
                os.kill(restarted, signal.SIGTERM)
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    atexit.register(stop)
    _wait_bound(path, server)
    os.environ[SOCKET_ENV] = path
    os.environ[OWNER_ENV] = str(os.getpid())
    return server


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
