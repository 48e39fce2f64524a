"""`launcher=local`: a study's runs as processes of this machine, one after another or `parallel`
at a time, each in its own session and stopped with the study (Ctrl-C, SIGTERM, even `kill -9`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mtl.jobs.forkserver import Forked, ForkServer
from mtl.jobs.member import Member, member_progress
from mtl.jobs.parent_death import die_with_parent


@dataclass(frozen=True)
class LocalLauncher:
    """`launcher=local`: each member a process of this machine, `parallel` at a time."""

    parallel: int = 1
    name: str = "local"

    def run(self, members: list[Member], out: Path, label: str) -> dict[str, str]:
        return run_local(members, self.parallel, out, label)


def run_local(
    members: list[Member], parallel: int, out: Path, label: str, fork: bool = True
) -> dict[str, str]:
    """Train each of `members` that has not finished (resume the interrupted), `parallel` at a
    time, logs of members side by side in `out`/logs; each one's outcome. The members are forked
    from one process that imported the trainer once (forkserver.py), or, where it cannot serve
    (or with `fork=False`, as `just bench-study` compares), each started as a fresh `python -m mtl`."""
    outcomes = {m.name: "finished (before)" for m in members if m.status() == "finished"}
    waiting = [m for m in members if m.status() != "finished"]
    print(
        f"{label}: {len(members)} runs in {out}, {len(outcomes)} finished before, "
        f"{len(waiting)} to train, {parallel} at a time"
    )
    env = members_environment(parallel)
    server = fork_server(env) if waiting and fork else None
    running: dict[str, tuple[Process, Any]] = {}
    by_name = {m.name: m for m in members}
    # Members side by side write to logs: the sweep's own bar says how far each one is. One at a
    # time, the member's own bar shows in the terminal instead.
    bar = tqdm(total=len(waiting), desc=label, unit=" runs", disable=parallel == 1)
    shown = 0.0
    try:
        while waiting or running:
            while waiting and len(running) < parallel:
                member = waiting.pop(0)
                running[member.name] = _launch(member, parallel, out, bar, env, server)
            time.sleep(0.2)
            if parallel > 1 and time.monotonic() - shown > PROGRESS_EVERY_S:
                bar.set_postfix_str("; ".join(member_progress(by_name[name]) for name in running))
                shown = time.monotonic()
            for name, (process, log) in list(running.items()):
                if process.poll() is None:
                    continue
                if log is not None:
                    log.close()
                outcomes[name] = (
                    "finished" if process.returncode == 0 else f"failed (exit {process.returncode})"
                )
                bar.write(f"  {name}: {outcomes[name]}")
                bar.update(1)
                del running[name]
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: each running member checkpoints and stops
        for process, _ in running.values():
            process.send_signal(signal.SIGINT)  # once: members run in their own sessions
        for process, _ in running.values():
            process.wait()
        raise KeyboardInterrupt(f"{label} stopped: run the same command again to resume it") from None
    finally:
        bar.close()
        if server is not None:
            server.close()
    return outcomes


Process = subprocess.Popen | Forked


def members_environment(parallel: int) -> dict[str, str]:
    env = dict(os.environ)
    if parallel > 1:
        # Runs side by side share the cores rather than each taking all of them (read by the BLAS
        # and OpenMP libraries when they load: the fork server is started with it).
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // parallel)))
    return env


def fork_server(env: dict[str, str]) -> ForkServer | None:
    """The study's fork server, or None (said) where it cannot serve: each member then starts fresh."""
    try:
        return ForkServer(env)
    except OSError:
        # an internal matter (the runs train the same, each paying its imports): not the user's
        return None


PROGRESS_EVERY_S = 2.0  # how often the sweep's bar re-reads its running members' steps


def _launch(
    member: Member, parallel: int, out: Path, bar: tqdm, env: dict[str, str], server: ForkServer | None
) -> tuple[Process, Any]:
    log_path = None
    if parallel > 1:
        logs = out / "logs"
        logs.mkdir(exist_ok=True)
        log_path = logs / f"{member.name}.log"  # a resumed run appends
        bar.write(f"  {member.name}: {member.status()} -> training (log: {log_path})")
    else:
        print(f"  {member.name}: {member.status()} -> training", flush=True)
    if server is not None:
        return server.start(member.arguments(), log_path), None
    log = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115  (closed when it ends)
    # Its own session: a terminal's Ctrl-C reaches the sweep only, which passes on one SIGINT.
    process = subprocess.Popen(
        member.command(),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT if log else None,
        start_new_session=True,
        preexec_fn=die_with_parent(),
    )
    return process, log
