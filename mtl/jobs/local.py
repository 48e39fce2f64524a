"""`launcher=local`: a study's runs as processes of this machine, one after another or `parallel`
at a time, each in its own session and stopped with the study (Ctrl-C, SIGTERM, even `kill -9`)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mtl.jobs.member import Member, progress
from mtl.train.interrupts import PARENT_DIED


@dataclass(frozen=True)
class LocalLauncher:
    """`launcher=local`: each member a process of this machine, `parallel` at a time."""

    parallel: int = 1
    name: str = "local"

    def run(self, members: list[Member], out: Path, label: str) -> dict[str, str]:
        return run_local(members, self.parallel, out, label)


def run_local(members: list[Member], parallel: int, out: Path, label: str) -> dict[str, str]:
    """Train each of `members` that has not finished (resume the interrupted), `parallel` at a
    time, logs of members side by side in `out`/logs; each one's outcome."""
    outcomes = {m.name: "finished (before)" for m in members if m.status() == "finished"}
    waiting = [m for m in members if m.status() != "finished"]
    print(
        f"{label}: {len(members)} runs in {out}, {len(outcomes)} finished before, "
        f"{len(waiting)} to train, {parallel} at a time"
    )
    running: dict[str, tuple[subprocess.Popen, Any]] = {}
    by_name = {m.name: m for m in members}
    # Members side by side write to logs: the sweep's own bar says how far each one is. One at a
    # time, the member's own bar shows in the terminal instead.
    bar = tqdm(total=len(waiting), desc=label, unit=" runs", disable=parallel == 1)
    shown = 0.0
    try:
        while waiting or running:
            while waiting and len(running) < parallel:
                member = waiting.pop(0)
                running[member.name] = _launch(member, parallel, out, bar)
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
    return outcomes


PROGRESS_EVERY_S = 2.0  # how often the sweep's bar re-reads its running members' steps


def member_progress(member: Member) -> str:
    """`<name> step N/M` (M: the planned steps, when the run has a fixed number)."""
    step, planned = progress(member.run_dir)
    if step is None:
        return f"{member.name} starting"
    return f"{member.name} step {step}" + (f"/{planned}" if planned else "")


def _launch(member: Member, parallel: int, out: Path, bar: tqdm) -> tuple[subprocess.Popen, Any]:
    env = dict(os.environ)
    if parallel > 1:
        # Runs side by side share the cores rather than each taking all of them.
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // parallel)))
        logs = out / "logs"
        logs.mkdir(exist_ok=True)
        log = open(logs / f"{member.name}.log", "a", encoding="utf-8")  # noqa: SIM115  (a resumed run appends)
        bar.write(f"  {member.name}: {member.status()} -> training (log: {logs / member.name}.log)")
        process = subprocess.Popen(
            member.command(),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        return process, log
    print(f"  {member.name}: {member.status()} -> training", flush=True)
    # Its own session: a terminal's Ctrl-C reaches the sweep only, which passes on one SIGINT.
    return subprocess.Popen(
        member.command(), env=env, start_new_session=True, preexec_fn=die_with_parent()
    ), None


def die_with_parent():
    """Run in a member before it starts: signal it when the sweep dies, even by `kill -9`.

    A member has its own session (so a terminal's Ctrl-C reaches the sweep alone), so it
    would otherwise outlive a killed sweep and train on unsupervised. PARENT_DIED makes it
    checkpoint and stop, as Ctrl-C would. Linux's parent-death signal; elsewhere nothing.
    """
    sweep_pid = os.getpid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, PARENT_DIED)
        if os.getppid() != sweep_pid:  # the sweep died before the signal was armed
            os.kill(os.getpid(), PARENT_DIED)

    return arm


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
