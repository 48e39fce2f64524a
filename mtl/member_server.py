"""The fork server of a study's members (`python -m mtl.member_server REQUESTS REPLIES`): it
imports what `train-multitask` imports, then forks one child per member that the study asks
for, each running `mtl <args>` as `python -m mtl` would (mtl/jobs/forkserver.py says why and
speaks the protocol from the study's side)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import traceback
from pathlib import Path

import mtl
from mtl.cli import run_as_process
from mtl.errors import printable
from mtl.jobs import parent_death
from mtl.jobs.forkserver import READY, Lines, write_line
from mtl.train.loop.interrupts import PARENT_DIED

# What `train-multitask` imports before its first step (the rest is imported in the child); not
# torch's compiler, which mtl's optimizers no longer import (mtl/runtime/no_dynamo.py). Not
# scikit-learn: through pyarrow it starts a thread (jemalloc's), which a fork must not cut off.
PRELOADED = ("mtl.jobs.train", "mtl.train.loop.run", "mtl.train.loop.trainer")


def serve(requests_fd: int, replies_fd: int) -> None:
    """The server: preload, say whether it can serve, then fork a child per request until the
    requests end and every child has ended."""
    try:
        for module in PRELOADED:
            __import__(module)
    except Exception as error:  # the study falls back to a fresh process per member
        write_line(replies_fd, {"state": "failed", "why": f"importing: {error}"})
        return
    if why := unsafe_to_fork():
        write_line(replies_fd, {"state": "failed", "why": why})
        return
    write_line(replies_fd, {"state": READY})
    requests = Lines(requests_fd)
    children: set[int] = set()
    asking = True
    while asking or children:
        if asking and requests.ready(0.1):
            request = requests.read()
            if request is None:
                asking = False
                continue
            pid = os.fork()
            if pid == 0:
                become_member(request["args"], request["log"], (requests_fd, replies_fd))
            children.add(pid)
            write_line(replies_fd, {"started": pid})
        elif not asking:
            select.select([], [], [], 0.1)
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                write_line(replies_fd, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def unsafe_to_fork() -> str | None:
    """Why a fork now would not start like a fresh process would, or None."""
    native = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1  # Linux's count
    if threading.active_count() > 1 or native > 1:
        return "a thread is running after the imports"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialised by an import"
    return None


def become_member(args: list[str], log: str | None, protocol: tuple[int, int]) -> None:
    """In the forked child: become a member's process and run `mtl <args>`; never returns."""
    code = 1
    try:
        os.setsid()
        parent_death.arm(os.getppid())  # first: the server dying stops the member
        for fd in protocol:
            os.close(fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        if log is not None:
            target = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(target, 1)
            os.dup2(target, 2)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, PARENT_DIED):
            signal.signal(sig, signal.SIG_DFL)
        sys.argv = [str(Path(mtl.__file__).with_name("__main__.py")), *args]  # as `python -m mtl` has it
        run_as_process()
        code = 0
    except SystemExit as exiting:
        if isinstance(exiting.code, str):
            print(printable(exiting.code), file=sys.stderr)
        code = exiting.code if isinstance(exiting.code, int) else (0 if exiting.code is None else 1)
    except BaseException:  # a crash says what a fresh process would have said
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
