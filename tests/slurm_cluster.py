"""A SLURM on this machine, from Debian's `slurm-wlm` and `munge` packages: munged, slurmctld
and a slurmd per node (one node, or several: `slurmd -N <node>` each on its own port), their
configuration, state, sockets and logs in one folder, stopped by the process ids it started.
What the SLURM tests run against, and what a person can start to try mtl's cluster commands
without a cluster:

    python3 tests/slurm_cluster.py start /tmp/slurm    # prints the line to export (add 2: two nodes)
    export SLURM_CONF=/tmp/slurm/slurm.conf
    just sweep lr=0.1,0.05 preset=cpu-small launcher=slurm slurm.partition=debug
    python3 tests/slurm_cluster.py stop /tmp/slurm

Needs root (the daemons run as the user that starts them, and slurmd must be able to run jobs
as any user) and the packages: `apt-get install slurmctld slurmd slurm-client munge`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PARTITION = "debug"
DAEMONS = ("munged", "slurmctld", "slurmd")
# A partition whose jobs preempt the default one's (requeued after SIGTERM and GRACE_S seconds)
URGENT = "urgent"
GRACE_S = 30
# A partition like the default one whose jobs get a grace of one second when preempted (SIGKILL
# KillWait=5 s later): a run whose step and checkpoint take longer is killed before its checkpoint
BRIEF = "brief"

# The node's GPUs, declared by device files that are not GPUs: jobs may ask for them
# (slurm.gpus_per_node=), and torch still sees none
FAKE_GPU_FILES = ("/dev/null", "/dev/zero")
GPUS = len(FAKE_GPU_FILES)


def program(name: str) -> str | None:
    """A daemon or client's path: the daemons are in /usr/sbin, which a user's PATH may lack."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def missing() -> str | None:
    """Why a cluster cannot start here, or None when it can."""
    if absent := [name for name in (*DAEMONS, "sbatch", "scontrol") if program(name) is None]:
        return f"{', '.join(absent)} not installed (apt-get install slurmctld slurmd slurm-client munge)"
    if os.geteuid() != 0:
        return "the one-node SLURM runs its daemons as root"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node_names(host: str, nodes: int) -> list[str]:
    """The nodes' names: the machine's own, and for a second node `localhost` (names this
    machine resolves: a job's first node is its torchrun rendezvous address)."""
    if nodes > 2:
        raise ValueError("this machine runs at most two nodes (its own name and localhost)")
    return [host, "localhost"][:nodes]


def _config(folder: Path, host: str, cpus: int, memory_mb: int, nodes: int = 1) -> str:
    ctld_port, slurmd_port = _free_port(), _free_port()
    names = node_names(host, nodes)
    # several slurmd on this machine: each its own port, and its own spool, pid and log files (%n)
    each = "-%n" if nodes > 1 else ""
    node_lines = "\n".join(
        f"NodeName={name} NodeAddr=127.0.0.1"
        + (f" Port={_free_port()}" if nodes > 1 else "")
        + f" CPUs={cpus // nodes} RealMemory={memory_mb // nodes} Gres=gpu:{GPUS} State=UNKNOWN"
        for name in names
    )
    listed = ",".join(names)
    return f"""# a one-node SLURM made by tests/slurm_cluster.py
ClusterName=mtl-test
GresTypes=gpu
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={folder / "munge.socket"}
CredType=cred/munge
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / f"spool{each}"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / f"slurmd{each}.pid"}
SlurmctldLogFile={folder / "slurmctld.log"}
SlurmdLogFile={folder / f"slurmd{each}.log"}
PlugStackConfig={folder / "plugstack.conf"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerParameters=sched_interval=1,bf_interval=1
JobRequeue=1
KillWait=5
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
{node_lines}
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName={PARTITION} Nodes={listed} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4 PriorityTier=1 GraceTime={GRACE_S}
PartitionName={BRIEF} Nodes={listed} MaxTime=INFINITE State=UP OverSubscribe=FORCE:4 PriorityTier=1 GraceTime=1
PartitionName={URGENT} Nodes={listed} MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
"""


class LocalCluster:
    """The daemons of a SLURM of `nodes` nodes on this machine (a slurmd each, sharing its
    `cpus`), whose files are in `folder`."""

    def __init__(self, folder: Path, cpus: int = 4, nodes: int = 1):
        self.folder = Path(folder).resolve()
        self.cpus, self.nodes = cpus, nodes
        self.conf = self.folder / "slurm.conf"

    @property
    def node_names(self) -> list[str]:
        return node_names(socket.gethostname().split(".")[0], self.nodes)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60) -> None:
        if reason := missing():
            raise RuntimeError(f"cannot start a SLURM here: {reason}")
        if (self.folder / "slurmctld.pid").is_file():
            raise RuntimeError(f"{self.folder} holds a cluster already: stop it first (stop {self.folder})")
        folder = self.folder
        host = socket.gethostname().split(".")[0]
        spools = ["spool"] if self.nodes == 1 else [f"spool-{name}" for name in self.node_names]
        for sub in ("state", *spools):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (folder / "plugstack.conf").write_text("")
        # GPUs as SLURM hands them out, on a machine without any: slurmd counts a GPU per device
        # file (22.05 reports none without one), and sets CUDA_VISIBLE_DEVICES from them
        (folder / "gres.conf").write_text(
            "AutoDetect=off\n" + "".join(f"Name=gpu File={device}\n" for device in FAKE_GPU_FILES)
        )
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        self.conf.write_text(_config(folder, host, self.cpus, memory // 2, self.nodes))
        subprocess.run(
            [
                program("munged"), "--force", f"--key-file={key}", f"--socket={folder / 'munge.socket'}",
                f"--pid-file={folder / 'munged.pid'}", f"--log-file={folder / 'munged.log'}",
                f"--seed-file={folder / 'munged.seed'}",
            ],
            check=True, env=self.env,
        )  # fmt: skip
        subprocess.run([program("slurmctld"), "-i", "-f", str(self.conf)], check=True, env=self.env)
        for name in self.node_names if self.nodes > 1 else [None]:
            named = ["-N", name] if name else []
            subprocess.run([program("slurmd"), *named, "-f", str(self.conf)], check=True, env=self.env)
        self._wait_for_node(timeout)

    def _wait_for_node(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            done = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=self.env, check=False
            )
            state = done.stdout.strip()
            if state and set(state.split()) <= {"idle", "mixed", "allocated"}:  # every node up
                return
            time.sleep(0.5)
        logs = {name: (self.folder / f"{name}.log") for name in DAEMONS}
        tails = {n: p.read_text()[-600:] if p.is_file() else "(no log)" for n, p in logs.items()}
        raise RuntimeError(f"the SLURM did not come up (node state {state!r}): {tails}")

    def stop(self) -> None:
        """Cancel every job (a job's processes outlive its slurmd), then stop the daemons this
        folder's pid files name (the ones it started), slurmd first."""
        if (self.folder / "slurmctld.pid").is_file():
            for partition in (PARTITION, BRIEF):
                subprocess.run([program("scancel"), f"--partition={partition}"], env=self.env, check=False)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                queued = subprocess.run(
                    [program("squeue"), "-h"], capture_output=True, text=True, env=self.env, check=False
                )
                if queued.returncode != 0 or not queued.stdout.strip():
                    break
                time.sleep(0.2)
        slurmds = sorted(p.stem for p in self.folder.glob("slurmd*.pid"))  # slurmd, or slurmd-<node> each
        for name in (*slurmds, "slurmctld", "munged"):
            pid_file = self.folder / f"{name}.pid"
            try:
                pid = int(pid_file.read_text().strip())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[0] not in ("start", "stop") or argv[2:] and not argv[2].isdigit():
        print("usage: python3 tests/slurm_cluster.py start|stop FOLDER [NODES]", file=sys.stderr)
        return 2
    cluster = LocalCluster(Path(argv[1]), nodes=int(argv[2]) if argv[2:] else 1)
    if argv[0] == "start":
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
