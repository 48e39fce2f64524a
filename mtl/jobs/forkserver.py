"""A study's members forked from one process that has imported the trainer once: the study's side
(the server is `mtl.member_server`).

A training process spends 3-7 s importing (torch, torch.distributed and FSDP, scikit-learn and
SciPy) before its first step: a study of tiny members paid it per member, often more than the
member's training. `launcher=local` starts this server once per study, with the members'
environment; it imports what `train-multitask` imports, then forks one child per member, as
multiprocessing's forkserver does. Each child is still a process of its own (its own session,
exit status, signals and crash), started from the imported state rather than from nothing:

- The server starts no thread and touches no GPU before it forks (checked: it refuses to serve
  otherwise, and the study falls back to a fresh `python -m mtl` per member), so a child begins
  as a fresh process would, but for the imports done.
- A child has its own session (the terminal's Ctrl-C reaches the study alone, which passes one
  SIGINT on), its stdin on /dev/null, its output where a member's goes (the terminal, or its log
  with parallel= above 1), and the parent-death signal: when the server dies (the study killed,
  even by `kill -9`, takes the server with it the same way), the member checkpoints and stops.

Protocol, one JSON line each way over two pipes (`python -m mtl.member_server REQUESTS REPLIES`,
their descriptors): the study writes {"args": [...], "log": path or null}; the server answers
{"started": pid} at once and {"exited": pid, "code": N} when that child ends (N < 0: killed by
signal -N, as `Popen.returncode` says). The requests' end tells the server to leave once its
children have.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from pathlib import Path

from mtl.errors import UserError
from mtl.jobs import parent_death

READY = "ready"  # the server's first line when it can serve


class Lines:
    """JSON lines over a pipe's raw descriptor, so that `select` on it never misses a line that a
    buffered reader took in already."""

    def __init__(self, fd: int):
        self.fd, self.pending = fd, b""

    def ready(self, timeout: float) -> bool:
        return b"\n" in self.pending or bool(select.select([self.fd], [], [], timeout)[0])

    def read(self) -> dict | None:
        """The next line (waiting for it); None at the end of the pipe."""
        while b"\n" not in self.pending:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)


def write_line(fd: int, message: dict) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


class ForkServer:
    """The study's side: start the server with the members' environment, ask it for members,
    hear when they end. Raises OSError when the server cannot serve (the caller falls back)."""

    def __init__(self, env: dict[str, str]):
        replies, replies_there = os.pipe()
        requests_there, self.requests = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mtl.member_server", str(requests_there), str(replies_there)],
            stdin=subprocess.DEVNULL,
            env=env,
            pass_fds=(requests_there, replies_there),
            start_new_session=True,  # the terminal's Ctrl-C is the study's to pass on
            preexec_fn=parent_death.die_with_parent(),  # the study killed: the server and its members stop
        )
        os.close(requests_there)
        os.close(replies_there)
        self.replies = Lines(replies)
        self.exited: dict[int, int] = {}
        try:
            first = self._reply()
        except UserError as error:  # it died starting: the study starts each member itself
            first = {"why": str(error)}
        if first.get("state") != READY:
            self.close()
            raise OSError(f"the fork server cannot serve: {first.get('why', first)}")

    def start(self, args: list[str], log: Path | None) -> Forked:
        try:
            write_line(self.requests, {"args": args, "log": str(log) if log else None})
        except BrokenPipeError:
            raise self._ended() from None
        while "started" not in (reply := self._reply()):
            self._note(reply)
        return Forked(self, reply["started"])

    def poll(self) -> None:
        """Take in every exit the server has said so far, without waiting."""
        while self.replies.ready(0):
            self._note(self._reply())

    def wait_for(self, pid: int) -> int:
        while pid not in self.exited:
            self._note(self._reply())
        return self.exited[pid]

    def close(self) -> None:
        """No more members: the server leaves once its children have ended."""
        with contextlib.suppress(OSError):
            os.close(self.requests)
        self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self.replies.fd)

    def _reply(self) -> dict:
        reply = self.replies.read()
        if reply is None:
            raise self._ended()
        return reply

    def _ended(self) -> UserError:
        """The server died under the study (its members got their parent-death signal: they
        checkpoint and stop): said in one line."""
        return UserError(
            f"the study's fork server ended (exit {self.process.wait()}): run the same command again "
            "to resume the study"
        )

    def _note(self, reply: dict) -> None:
        if "exited" in reply:
            self.exited[reply["exited"]] = reply["code"]


class Forked:
    """A member forked by the server, with the part of `subprocess.Popen` the local launcher uses."""

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.server.poll()
            self.returncode = self.server.exited.get(self.pid)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = self.server.wait_for(self.pid)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
