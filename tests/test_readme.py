"""Every command line README.md shows runs as a newcomer types it, on the shared data.

The lines run in README's order, with `just`, in a folder laid out as a clone beside ../shared
(a `justfile`, `experiments/`, `../shared/data`), with `MTL_DATA_DIR=../shared/data` as README's
Train section asks. What cannot run here as written is changed in the open, line by line, in
HOW below: keys every command documents that make a run small (`max_steps=`, `hidden=`, ...;
`wandb=disabled` and `contamination=false` once the first lines have logged to W&B and kept the
ledger), the run folders a line names by placeholder (`runs/<run>`), a path of the author's
machine replaced by the shared copy, and the few lines that need what this machine lacks (4
GPUs, W&B's servers) with the one-line refusal they must give. A README line missing from HOW
fails the test: a new command in README is a new row here.

The lines run in README's order up to the last one later lines depend on (builds, the runs they
name); the rest in two lanes at once that never write the same folder (about 5 minutes on 2
cores instead of 8 one after another).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A training run small enough for a test: two steps, a small encoder, small evaluations (test too:
# SNLI's whole 9,824 test pairs are the default)
SMALL_RUN = "max_steps=2 max_eval=64 sample_test=true hidden=16 head_hidden=16"
# After the first training (which reads the whole build, as README's line does): the first 2,000
# of ClassifSQuAD's 985,236 training triples. Reading, hashing and indexing them all was 3 of a
# tiny run's 8 s, in each of the walk's 26 trainings (sweep members and torchrun ranks included)
SMALL_DATA = "squad.max_train=2000"
# `just transfer` on fewer tasks: README's line trains classifiers on all 16 (minutes each). The
# smallest task, scored by cosine similarity: the standard protocol's classifiers (nested
# cross-validation, 20 s on CR here) run on small files in tests/test_transfer_protocol.py and
# test_locks.py, and fast-mode ones on real tasks in README's first transfer line
FEW_TASKS = "tasks=STS16"  # 1,867 sentences
# After the first training and the first transfer (which log to W&B and, training, keep the
# contamination ledger as README's lines do), jobs skip both: 4 s of W&B and 2 s of ledger a job
QUIET = "wandb=disabled"
QUIET_RUN = f"{SMALL_RUN} {SMALL_DATA} wandb=disabled contamination=false"
# A sweep's members two at a time
SMALL_SWEEP = f"{QUIET_RUN} parallel=2"


@dataclass(frozen=True)
class How:
    shrink: str = ""  # documented keys appended to the line's first `just` command
    replace: tuple[tuple[str, str], ...] = ()  # (README's text, what stands for it here)
    skip: str = ""  # why this line cannot run here at all
    refused: str = ""  # the line needs what this machine lacks: its one-line error (exit 2)
    why: str = ""  # why the line is changed
    names: tuple[str, ...] = ()  # placeholders of later lines that stand for the run this line makes
    before: tuple[str, ...] = ()  # commands run first (on the same placeholders)
    interrupted: str = ""  # a training command stopped by Ctrl-C first: its run is this line's runs/<run>


# README's command lines (comments dropped, continuations joined) -> how each runs here
HOW: dict[str, How] = {
    "pip install torch==2.13.0 && pip install -e '.[dev]' && MTL_DATA_DIR=../shared/data just build-classifsquad": How(
        replace=(("pip install torch==2.13.0 && pip install -e '.[dev]' && ", ""),),
        why="installed already (CI's install step runs exactly this)",
    ),
    "pip install torch==2.13.0 && pip install -e '.[dev]' && MTL_DATA_DIR=../shared/data just test": How(
        skip="the test suite itself: CI runs this line"
    ),
    "MTL_DATA_DIR=../shared/data just train-multitask preset=cpu-small": How(
        shrink=SMALL_RUN, names=("runs/<that run>", "runs/<run>")
    ),
    "MTL_DATA_DIR=../shared/data just transfer run=runs/<that run> mode=fast tasks=MR,CR,TREC,STS14": How(),
    "just build-classifsquad": How(),
    "just build-classifsquad squad=/data/squad vectors=/data/glove.840B.300d.zip out=data/classifsquad-paragraph scope=paragraph": How(
        replace=(
            ("/data/squad", "../shared/data/squad"),
            ("/data/glove.840B.300d.zip", "../shared/data/glove/glove.6B.50d.zip"),
        ),
        why="the author's paths: the shared copies",
    ),
    "MTL_DATA_DIR=../shared/data just build-classifsquad preset=classifsquad-paper out=data/classifsquad-paper": How(),
    "just train-multitask steps_nli=1000 steps_squad=500": How(shrink=QUIET_RUN, names=("runs/a",)),
    "just train-multitask tasks=nli,squad nli.steps=1000 squad.steps=500 nli.batch=64": How(
        shrink=QUIET_RUN, names=("runs/b",)
    ),
    "just train-multitask preset=cpu-small": How(shrink=QUIET_RUN),
    "just train-multitask tasks=nli,squad,experiments/tasks/sick.toml sick.steps=50 sick.batch=32": How(
        shrink=QUIET_RUN
    ),
    "just train-multitask resume=runs/<run>": How(
        interrupted=f"just train-multitask preset=cpu-small {QUIET_RUN.replace('max_steps=2', 'max_steps=100000 max_minutes=0.1')} "
        "out=runs/interrupted",
        why="resume continues a run that stopped: this one is stopped with Ctrl-C first (it would train "
        "for 6 s of steps, so Ctrl-C comes first however loaded the machine)",
    ),
    "just train-distributed 4 preset=paper-multitask-blstm2048": How(
        replace=(("train-distributed 4", "train-distributed 2"),),
        shrink=f"device=cpu {QUIET_RUN}",
        why="4 GPUs: 2 CPU processes instead",
    ),
    "just train-multitask encoder=hf hf_model=sentence-transformers/all-MiniLM-L6-v2 steps_nli=1000 steps_squad=500": How(
        replace=(("sentence-transformers/all-MiniLM-L6-v2", "../shared/data/models/all-MiniLM-L6-v2"),),
        shrink=f"max_steps=2 max_eval=64 sample_test=true {SMALL_DATA} nli.batch=8 squad.batch=8 {QUIET} contamination=false",
        why="the Hub is out of reach: the shared copy of the same model",
    ),
    "just sweep fig2": How(
        shrink=f"steps_nli=250,500 {SMALL_SWEEP}",
        why="two of its four members: a named sweep's axis shrinks from the command line, as README says",
    ),
    "just sweep steps_nli=250,500 lr=1e-3,5e-4 preset=cpu-small sweep=my-grid": How(shrink=SMALL_SWEEP),
    "just sweep lr=1e-3,3e-4 preset=cpu-small seeds=3": How(
        replace=(("seeds=3", "seeds=2"),),
        shrink=SMALL_SWEEP,
        why="two seeds of each learning rate, not three: the same study, two training processes fewer",
    ),
    "just report runs/sweeps/fig2": How(),
    "just report runs/a runs/b out=a-vs-b.html": How(),
    "just dashboard group=fig2": How(
        refused="just dashboard saves a workspace on W&B's servers: log in first",
        why="W&B's servers are out of reach",
    ),
    "just sweep objectives max_minutes=20 && just compare-objectives": How(
        replace=(
            ("max_minutes=20", f"max_minutes=20 tasks=nli+squad {SMALL_SWEEP}"),
            ("compare-objectives", "compare-objectives transfer_tasks=CR"),
        ),
        why="one of its five objectives (Liu et al.'s), one transfer task",
    ),
    "just transfer run=runs/<run>": How(shrink=f"{FEW_TASKS} {QUIET}"),
    "just transfer run=runs/<run> tasks=MR,CR,STS14 mode=fast pooling=max+mean": How(shrink=QUIET),
    "just transfer baseline=glove-bow": How(shrink=f"{FEW_TASKS} {QUIET}"),
    "just transfer baseline=hf hf_model=../shared/data/models/all-MiniLM-L6-v2": How(
        shrink=f"tasks=STS16 {QUIET}"
    ),
    "just transfer run=runs/a,runs/b ensemble=mean": How(
        shrink=f"tasks=CR mode=fast {QUIET}",
        why="the standard protocol's nested cross-validation on two encoders' features: 15.8 s against fast mode's 6.6 here",
    ),
    "just transfer run=runs/<run> tasks=MR,CR features=nb-bigram": How(
        replace=(("tasks=MR,CR", "tasks=CR"),),
        shrink=f"mode=fast {QUIET}",
        why="the standard protocol's grid on MR's NB bigram features takes a minute",
    ),
    "just merge-encoders run=runs/a run=runs/b method=ties out=runs/merged": How(),
    "just compare runs/a* runs/b* report=transfer-fast": How(
        shrink=QUIET,
        before=tuple(
            f"just transfer run={run} mode=fast tasks=CR,STS16 {QUIET}" for run in ("runs/a", "runs/b")
        ),
        why="runs a and b need transfer-fast reports first: README's first transfer line on each, on two tasks",
    ),
    "just decompose run=runs/<run> report=transfer-fast": How(shrink=QUIET),
    "just transfer run=runs/<run> mode=fast train_fraction=0.1": How(
        shrink=f"tasks=CR {QUIET}", why="the smallest task that trains a classifier (3,775 sentences)"
    ),
    "just maxpool run=runs/<run> limit=5000": How(shrink=QUIET),
    'just neighbours run=runs/a query="a man plays a guitar ." pool=experiments/sentences.txt k=5': How(
        shrink=QUIET
    ),
    "just tsne run=runs/<run> task=TREC out=trec.html": How(),
    "just probing run=runs/<run> data=SentEval/data/probing": How(
        skip="SentEval's probing files are not in ../shared/data (`just get-senteval` fetches them); "
        "tests/test_probing.py reads files of their format"
    ),
    "just probing run=runs/<run> generate=sentence_length,word_content,bigram_shift": How(
        shrink=f"max_sentences=5000 {QUIET}",
        why="SentEval's MLP on 100,000 generated sentences per task takes 25 s",
    ),
    "MTL_DATA_DIR=../shared/data just train-multitask plugins=experiments/plugins/example.py "
    "tasks=nli,hypothesis_only nli.train_split=train_small hypothesis_only.train_split=train_small "
    "nli.steps=100 hypothesis_only.steps=50 encoder=bow_projection callbacks=loss_watch max_steps=600": How(
        replace=(("max_steps=600", f"max_steps=2 max_eval=64 sample_test=true {QUIET} contamination=false"),)
    ),
    "just transfer plugins=experiments/plugins/example.py run=runs/<run> tasks=SUBJ-1K mode=fast": How(
        shrink=QUIET
    ),
}


def readme_command_lines(text: str) -> list[str]:
    """The lines of README's indented blocks that run `just`: comments after two spaces dropped,
    backslash continuations joined."""
    lines, pending = [], ""
    for line in text.splitlines():
        if not line.startswith("    ") and not pending:
            continue
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        pending = ""
        line = re.split(r"\s{2,}#\s", line)[0].strip()
        if re.search(r"(^|\s)just\s", line):
            lines.append(line)
    return lines


def as_run_here(line: str, how: How, runs: dict[str, str]) -> str:
    """The command this test runs for README's `line`."""
    for readme, here in how.replace:
        line = line.replace(readme, here)
    if how.shrink:
        first, sep, rest = line.partition(" && ")
        line = f"{first} {how.shrink}{sep}{rest}"
    # run folders named by placeholder: the runs the lines above made
    for placeholder, folder in runs.items():
        line = re.sub(rf"{re.escape(placeholder)}(?=[\s,*]|$)", folder, line)
    return line


def shell(command: str) -> list[str]:
    return ["bash", "-c", command]


def interrupted_run(command: str, work: Path, env: dict) -> str:
    """Start a training `command` (with its own out=) and press Ctrl-C (SIGINT to its process
    group, as a terminal does) once its run folder exists: the run checkpoints and stops, or,
    stopped before its first step, has no checkpoint (resume then starts it again from step 0, as
    README says)."""
    folder = command.rsplit("out=", 1)[1].split()[0]
    process = subprocess.Popen(shell(command), cwd=work, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while (
        not (work / folder / "config.json").is_file()
        and process.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode != 0, f"{command} was not stopped mid-run: {stderr[-2000:]}"
    assert not (work / folder / "summary.json").is_file(), f"{command} finished before Ctrl-C"
    return folder


def run_folders(work: Path) -> set[str]:
    return (
        {f"runs/{p.name}" for p in (work / "runs").iterdir() if (p / "config.json").is_file()}
        if (work / "runs").is_dir()
        else set()
    )


def lane_of(line: str, how: How) -> int:
    """0: runs alone (the build trainings read; a line whose run later lines name, found as the
    folder it made); in two lanes at once: 1, the lines that read or write the first run or a
    baseline's folder, and the two trainings into folders no other line names (runs/interrupted;
    the distributed run, named by its preset), which even the lanes' times; 2, the others (new
    runs and builds, sweeps, runs a and b). No folder is written by both lanes."""
    if ("build-classifsquad" in line and "out=" not in line) or how.names:
        return 0  # data/classifsquad, which every training reads; runs that later lines name
    if how.interrupted or "train-distributed" in line:
        return 1
    return 1 if "runs/<run>" in line or "runs/<that run>" in line or "baseline=" in line else 2


def test_every_readme_command_line_runs_as_written(shared_data, tmp_path):
    lines = readme_command_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(lines) > 30
    assert not (missing := [line for line in lines if line not in HOW]), (
        f"README shows command lines this test does not know; add each to HOW: {missing}"
    )
    assert not (gone := [line for line in HOW if line not in lines]), (
        f"HOW has lines README no longer shows: {gone}"
    )
    runnable = [line for line in lines if not HOW[line].skip]
    # README's order up to the last line that must run alone; the rest in two lanes at once
    alone = max(i for i, line in enumerate(runnable) if lane_of(line, HOW[line]) == 0) + 1
    lanes = {lane: [line for line in runnable[alone:] if lane_of(line, HOW[line]) == lane] for lane in (1, 2)}

    # a clone's layout beside ../shared: README's relative paths resolve as they do for a user
    work = tmp_path / "mtl"
    work.mkdir()
    for name in ("justfile", "experiments"):
        (work / name).symlink_to(ROOT / name)
    (tmp_path / "shared").symlink_to(shared_data.resolve().parent)
    env = {**os.environ, "MTL_DATA_DIR": "../shared/data", "WANDB_MODE": "offline", "PYTHON": sys.executable}
    env.pop("WANDB_API_KEY", None)

    runs: dict[str, str] = {}
    failures: list[str] = []

    def run_line(line: str) -> None:
        how = HOW[line]
        started = time.perf_counter()
        for first in how.before:
            prepared = subprocess.run(
                shell(as_run_here(first, How(), runs)), cwd=work, env=env, capture_output=True, text=True
            )
            if prepared.returncode:
                failures.append(
                    f"{first} (before {line})\n  exit {prepared.returncode}: {prepared.stderr[-500:]}"
                )
                return
        here = dict(runs)
        if how.interrupted:
            here["runs/<run>"] = interrupted_run(how.interrupted, work, env)
        command = as_run_here(line, how, here)
        before = run_folders(work)
        done = subprocess.run(shell(command), cwd=work, env=env, capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - started
        print(f"{seconds:6.1f} s  exit {done.returncode}  {command}", file=sys.stderr, flush=True)
        if how.names:
            (made,) = run_folders(work) - before
            runs.update(dict.fromkeys(how.names, made))
        last = (done.stderr.strip().splitlines() or [""])[-1]
        if how.refused:
            if done.returncode != 2 or how.refused not in last:
                failures.append(f"{command}\n  expected the one-line refusal {how.refused!r}, got exit "
                                f"{done.returncode}: {last}")  # fmt: skip
        elif done.returncode != 0:
            failures.append(f"{command}\n  exit {done.returncode}: {last}")

    for line in runnable[:alone]:
        run_line(line)
    if not failures:
        with ThreadPoolExecutor(2) as pool:
            for lane in [
                pool.submit(lambda lane=lane: [run_line(line) for line in lane]) for lane in lanes.values()
            ]:
                lane.result()
        # README's Python example, on the first run
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        block = re.search(r"\n((?:    .*\n)*    from mtl import load_encoder\n(?:    .*\n)+)", text)
        assert block, "README's Python example (from mtl import load_encoder) is gone"
        code = "\n".join(line[4:] for line in block.group(1).splitlines()).replace(
            "runs/<run>", runs["runs/<run>"]
        )
        sentences = 'sentences = ["A man is playing a guitar.", "Two dogs run on the beach."]\n'
        example = subprocess.run(
            [sys.executable, "-c", sentences + code], cwd=work, capture_output=True, text=True
        )
        if example.returncode:
            failures.append(f"README's Python example: {example.stderr[-1000:]}")
    assert not failures, "README command lines that fail:\n" + "\n".join(failures)
