"""The commands behind the justfile: `python -m mtl COMMAND key=value ...`."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import errno
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtl import plugins
from mtl.config import apply_overrides, describe_keys, paths_and_keys, to_dict
from mtl.console import printable_stdout, say
from mtl.errors import UserError
from mtl.runtime.ranks import LOST_A_PEER, LOST_CONTACT, rank_says
from mtl.train.loop.interrupts import PARENT_DIED


@dataclass(frozen=True)
class Command:
    """A command of the table: its module's `command(args)` runs it, imported only then."""

    module: str  # where `command(args: Sequence[str])` is
    config: str  # "module:Class", the config whose keys it takes (its --help)
    summary: str
    extra_keys: tuple[tuple[str, str, str], ...] = ()  # arguments that are not config keys
    task_keys: bool = False  # takes tasks= (its rows are built when help is asked: they import the tasks)
    resolve: str = ""  # "module:function" making its config from its arguments (--print-config)
    study: str = ""  # a built-in study's name: the command is `just study <study> ...`

    def run(self, args: Sequence[str]) -> None:
        self.imported(self.module).command([self.study, *args] if self.study else args)

    @staticmethod
    def imported(module: str) -> Any:
        """The command's module; the developer tools (tools/) run from a checkout of mtl, and are
        not installed with it."""
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as error:
            top = module.split(".")[0]
            if error.name not in (top, module) or top == "mtl":
                raise
            raise UserError(
                f"{module} is not importable here: the developer tools (tools/) run from a checkout of "
                "mtl: cd into the checkout and run the command there"
            ) from None

    def config_class(self) -> Any:
        module, _, name = self.config.partition(":")
        return getattr(self.imported(module), name)

    def resolved_config(self, args: Sequence[str]) -> Any:
        """The config the command would run with: presets, then its keys, with the `auto`s its
        `resolve` function makes concrete (training: for this machine's device, as config.json)."""
        if self.resolve:
            module, _, name = self.resolve.partition(":")
            return getattr(importlib.import_module(module), name)(args)
        keys = paths_and_keys(args)[1]
        if not self.passes_training_keys:
            return apply_overrides(self.config_class()(), keys)
        # A study: its own keys, and the training configuration every one of its runs starts from
        # (before the keys the study sets per run: budget, seed, name, folder, what it varies).
        own_names = {field.name for field in dataclasses.fields(self.config_class())}
        own = [k for k in keys if k.partition("=")[0] in own_names or k.startswith("slurm.")]
        training = [k for k in keys if k not in own]
        runs = COMMANDS["train-multitask"].resolved_config(training)
        return {
            "study": to_dict(apply_overrides(self.config_class()(), own)),
            "training": runs if isinstance(runs, dict) else to_dict(runs),
        }

    @property
    def passes_training_keys(self) -> bool:
        """Whether every key that is not the command's own goes to its runs (the studies)."""
        return any(name == "KEY" and "train-multitask key" in text for name, _, text in self.extra_keys)


def _task_keys() -> tuple[tuple[str, str, str], ...]:
    from mtl.tasks import DEFAULT_TASKS, KINDS  # the task kinds, imported when their help is asked
    from mtl.train.config.train_config import legacy_keys

    old = ", ".join(f"{key}=" for key in legacy_keys() if "." not in key)
    return (
        (
            "tasks",
            ",".join(DEFAULT_TASKS),
            f"the run's tasks, in order (the first picks the best checkpoint): {', '.join(KINDS)}, "
            "or task files (./my-task.toml); each has the keys <task>.<key>= below",
        ),
        ("", "", f"old keys still accepted: {old}"),
    )


TRAIN_KEYS = (
    (
        "preset",
        "none",
        "a preset in experiments/ (cpu-small, paper-blstm2048-nli, ...) or a file (./mine.toml); keys override it",
    ),
    ("resume", "none", "continue runs/<run> where its last checkpoint left it"),
    ("plugins", "none", "modules or .py files that register tasks, encoders, ... (comma-separated)"),
)
LAUNCHER_KEY = (
    "launcher",
    "local",
    "local: train here; slurm: as a SLURM job (slurm.<key>=, listed by just sweep --help; docs/cluster.md)",
)

COMMANDS: dict[str, Command] = {
    "build-classifsquad": Command(
        "dataset_builders.classifsquad",
        "dataset_builders.classifsquad:BuildConfig",
        "SQuAD v1.1 -> ClassifSQuAD triples on disk",
        (
            (
                "preset",
                "none",
                "a build preset in experiments/builds/ (classifsquad-paper) or a file; keys override it",
            ),
        ),
        resolve="dataset_builders.classifsquad:config_from_args",
    ),
    "get-senteval": Command(
        "dataset_builders.senteval",
        "dataset_builders.senteval:GetSentEvalConfig",
        "SentEval's transfer and probing data, fetched, processed and checked",
    ),
    "gpu-check": Command(
        "tools.gpu_check",
        "tools.gpu_check:GpuCheckConfig",
        "every CUDA path and GPU benchmark in one go, into one results file (for a lent GPU)",
    ),
    "bench-build": Command(
        "tools.build",
        "tools.build:BenchBuildConfig",
        "wall time of a full build, caches (vectors, tokens) cold and warm",
    ),
    "train-multitask": Command(
        "mtl.jobs.train",
        "mtl.train.config.train_config:TrainConfig",
        "multitask training of a shared sentence encoder (SNLI and ClassifSQuAD by default; tasks=)",
        (*TRAIN_KEYS, LAUNCHER_KEY),
        task_keys=True,
        resolve="mtl.jobs.train:config_to_print",
    ),
    "status": Command(
        "mtl.jobs.status",
        "mtl.jobs.status:StatusConfig",
        "where each run of a study (or one run) stands: state, step, time left, SLURM job",
        (("FOLDER", "none", "a study's folder (runs/sweeps/<study>, a versus-single folder) or a run's"),),
    ),
    "cancel": Command(
        "mtl.jobs.cancel",
        "mtl.jobs.status:StatusConfig",
        "stop a study's SLURM jobs (each run checkpoints and stays resumable)",
        (("FOLDER", "none", "a study's folder or a run's, launched with launcher=slurm"),),
    ),
    "train-distributed": Command(
        "mtl.train.loop.launch",
        "mtl.train.config.train_config:TrainConfig",
        "train-multitask over N processes of this machine with torchrun (N first, then its keys)",
        (("N", "none", "the number of processes (one per GPU, or per share of the CPU cores)"), *TRAIN_KEYS),
        task_keys=True,
        resolve="mtl.train.loop.launch:config_to_print",
    ),
    "sweep": Command(
        "mtl.jobs.sweep",
        "mtl.jobs.configs:SweepConfig",
        "a grid of training runs in one W&B group (a named sweep such as fig2, or key=v1,v2 axes)",
        (
            ("NAME", "none", "a sweep in experiments/sweeps/ (fig2); its keys come first"),
            ("KEY", "none", "any train-multitask key; comma-separated values make an axis of the grid"),
        ),
        resolve="mtl.jobs.sweep:member_configs",
    ),
    "report": Command(
        "mtl.analysis.report",
        "mtl.analysis.configs:ReportConfig",
        "one HTML page of plots and results from run folders, a sweep folder or a W&B group",
        (("PATH", "none", "run folders (runs/<run>) or a sweep folder (runs/sweeps/<sweep>)"),),
    ),
    "dashboard": Command(
        "mtl.analysis.dashboard",
        "mtl.analysis.dashboard:DashboardConfig",
        "a saved W&B workspace with mtl's panels (online), or its JSON with spec=PATH",
    ),
    "bench-train": Command(
        "tools.train",
        "tools.configs:BenchTrainConfig",
        "a training step of mtl next to the 2018 code's and a bare-LSTM floor, at 300-d",
    ),
    "bench-encode": Command(
        "tools.encode",
        "tools.configs:BenchEncodeConfig",
        "sentences/s of encode() next to an InferSent-style encoder, with encode()'s time by stage",
    ),
    "bench-loop": Command(
        "tools.loop",
        "tools.configs:BenchLoopConfig",
        "a whole training run's examples/s next to the same steps timed alone",
    ),
    "bench-ranks": Command(
        "tools.ranks",
        "tools.ranks:BenchRanksConfig",
        "training throughput with 1, 2, ... torchrun processes, side by side",
    ),
    "bench-slurm": Command(
        "tools.slurm",
        "tools.slurm:BenchSlurmConfig",
        "start-up through SLURM against here, and a requeued run's lost work (needs SLURM_CONF)",
    ),
    "bench-verdicts": Command(
        "tools.verdicts",
        "tools.configs:BenchVerdictsConfig",
        "how often just compare's verdicts are wrong: seeds of one config against each other, and a planted effect",
    ),
    "bench-affinity": Command(
        "tools.affinity_floor",
        "tools.configs:BenchAffinityConfig",
        "affinity's noise floor checked: a shuffled-label task inside it, and its coverage of fresh held batches",
    ),
    "bench-hf": Command(
        "tools.hf",
        "tools.configs:BenchHFConfig",
        "training steps per second of a pretrained transformer (encoder=hf), fp32 and bf16",
    ),
    "transfer": Command(
        "mtl.eval.transfer.suite",
        "mtl.eval.configs:TransferConfig",
        "SentEval-style transfer evaluation of an encoder",
    ),
    "compare": Command(
        "mtl.analysis.significance",
        "mtl.analysis.significance:SignificanceConfig",
        "transfer results of encoders: per task and across tasks, an interval over seeds and items and a verdict",
        (("PATH", "none", "run folders or a sweep folder; runs that differ only in seed= form one encoder"),),
    ),
    "plan-seeds": Command(
        "mtl.analysis.power",
        "mtl.analysis.power:PlanSeedsConfig",
        "seeds per arm a study needs to detect a difference with 80% power, from a pilot's seed and item variances",
        (("PATH", "none", "the pilot: run folders or a sweep folder, 2 seeds of a configuration at least"),),
    ),
    "decompose": Command(
        "mtl.analysis.decompose",
        "mtl.analysis.configs:DecomposeConfig",
        "a run's transfer accuracy by sentence length, OOV rate and label, from its report's items",
    ),
    "maxpool": Command(
        "mtl.analysis.maxpool",
        "mtl.analysis.configs:MaxPoolConfig",
        "which words max pooling picks over a corpus, trained and untrained, with a page of examples",
    ),
    "neighbours": Command(
        "mtl.analysis.neighbours",
        "mtl.analysis.configs:NeighboursConfig",
        "the pool sentences nearest to a query by the cosine of their embeddings",
    ),
    "tsne": Command(
        "mtl.analysis.tsne",
        "mtl.analysis.configs:TsneConfig",
        "a transfer task's sentences embedded by a run, laid out by t-SNE and coloured by label (a page)",
    ),
    "probing": Command(
        "mtl.eval.probing",
        "mtl.eval.configs:ProbingConfig",
        "probing tasks (Conneau et al. 2018): SentEval's sets (data=) or generated surface tasks (generate=)",
    ),
    "mine-negatives": Command(
        "mtl.eval.mine_negatives",
        "mtl.eval.configs:MineConfig",
        "hard negatives for mnrl mined by an encoder: a triples file and a task file naming it",
    ),
    "export-encoder": Command(
        "mtl.eval.export_encoder",
        "mtl.eval.configs:ExportConfig",
        "a run's encoder for sharing: only words of the public vectors file (vocabulary=public)",
    ),
    "ledger": Command(
        "mtl.train.callbacks.ledger",
        "mtl.eval.configs:LedgerConfig",
        "a finished run's contamination ledger computed again (runs of contamination=false or before 2026-11-29)",
    ),
    "merge-encoders": Command(
        "mtl.eval.merge",
        "mtl.eval.configs:MergeConfig",
        "one encoder from several of one initialisation: average, task arithmetic or TIES (lam chosen on dev)",
        extra_keys=(
            ("run", "", "an encoder to merge (run folder or encoder file): one run= each, or the paths bare"),
        ),
    ),
    "reproduce": Command(
        "mtl.analysis.reproduce",
        "mtl.analysis.reproduce:ReproduceConfig",
        "a paper-* or infersent-* run's numbers beside the figures its paper publishes for that row",
    ),
    "mteb": Command(
        "mtl.eval.mteb_run",
        "mtl.eval.configs:MTEBConfig",
        "MTEB tasks on a run's encoder: a transfer report of the run (report, compare) and a W&B run",
    ),
    "push-encoder": Command(
        "mtl.eval.push_encoder",
        "mtl.eval.configs:PushConfig",
        "upload a run's sentence-transformers folder and model card to the Hugging Face Hub",
    ),
    "fuzz": Command(
        "tools.fuzz",
        "tools.configs:FuzzConfig",
        "every reader of user files fed damaged copies: each must read or refuse in one line",
    ),
    "compare-objectives": Command(
        "mtl.studies.objectives",
        "mtl.analysis.configs:CompareConfig",
        "transfer each run of a sweep over objectives; a table and a page of score against time",
    ),
    "versus-single": Command(
        "mtl.studies.study",
        "mtl.jobs.configs:VersusConfig",
        "each training task alone and the mixture at one budget, transferred, with verdicts (and merge and regime arms)",
        (
            (
                "KEY",
                "none",
                "any train-multitask key (preset=, tasks=, schedule=, ...): the mixture's configuration",
            ),
        ),
        study="versus-single",
    ),
    "train-groups": Command(
        "mtl.studies.study",
        "mtl.jobs.configs:TrainGroupsConfig",
        "a task grouping (TAG's selection from a run's affinity, or named) against all tasks in one network and each alone, with seeds and verdicts",
        (
            (
                "KEY",
                "none",
                "any train-multitask key: tasks=, preset=, ... (the configuration whose training tasks are grouped)",
            ),
        ),
        study="train-groups",
    ),
    "affinity-check": Command(
        "mtl.studies.study",
        "mtl.jobs.configs:AffinityCheckConfig",
        "the affinity toward watching tasks against leaving each training task out (Spearman with a seed-resampled interval)",
        (
            (
                "KEY",
                "none",
                "any train-multitask key: tasks= with a watching task (<task>.train=false), affinity_every=, preset=, ...",
            ),
        ),
        study="affinity-check",
    ),
    "mixture-search": Command(
        "mtl.studies.study",
        "mtl.jobs.configs:MixtureSearchConfig",
        "proxy runs of sampled task mixtures, a regression to the best one, then it against the usual mixtures with seeds and verdicts (RegMix)",
        (
            (
                "KEY",
                "none",
                "any train-multitask key (preset=, tasks=, select=, ...): the runs' configuration",
            ),
        ),
        study="mixture-search",
    ),
    "compare-balancers": Command(
        "mtl.studies.study",
        "mtl.jobs.configs:BenchBalancersConfig",
        "every balancer and the tuned weighted sum at the same tuning budget and seeds, judged on transfer with verdicts",
        (
            (
                "KEY",
                "none",
                "any train-multitask key (preset=, tasks=, select=, ...): the runs' configuration (schedule=mixed)",
            ),
        ),
        study="compare-balancers",
    ),
    "compare-mixing": Command(
        "mtl.studies.study",
        "mtl.jobs.configs:BenchMixingConfig",
        "online mixing schedules against static mixtures at equal compute, with a planted noise task, seeds and verdicts",
        (
            (
                "KEY",
                "none",
                "any train-multitask key (preset=, tasks=, select=, ...): the runs' configuration",
            ),
        ),
        study="compare-mixing",
    ),
    "study": Command(
        "mtl.studies.study",
        "mtl.jobs.configs:StudyConfig",
        "a registered study (a plugin's, in one file: docs/extending.md): its arms with seeds at equal compute, judged against its baseline with verdicts",
        (
            ("NAME", "none", "the study, as registered (register_study); load a plugin's with plugins="),
            (
                "KEY",
                "none",
                "any train-multitask key (preset=, tasks=, select=, ...): the runs' configuration",
            ),
        ),
    ),
    "bench-study": Command(
        "tools.study",
        "tools.configs:BenchStudyConfig",
        "a small study's wall time against its members' training steps, members forked or each a fresh python",
        (("KEY", "none", "any train-multitask key (preset=, tasks=, ...): the members' configuration"),),
    ),
    "readme-picture": Command(
        "tools.readme_picture",
        "tools.readme_picture:ReadmePictureConfig",
        "README's first screen from a real run: the commands' last lines and a thumbnail of its report page",
    ),
    "bench-transfer": Command(
        "tools.transfer", "tools.configs:BenchTransferConfig", "wall time of the transfer suite"
    ),
}

# Earlier names of commands, still taken: the two studies once named like the timing benchmarks
ALIASES = {"bench-balancers": "compare-balancers", "bench-mixing": "compare-mixing"}

HELP = ("--help", "-h", "help")
PRINT_CONFIG = "--print-config"


def print_config(name: str, args: Sequence[str]) -> int:
    """Print the config `name args` would run with, as JSON, and run nothing."""
    from mtl.config import to_dict
    from mtl.files import jsonfile

    try:
        config = COMMANDS[name].resolved_config(args)
    except UserError as error:
        say(f"error: {error}")
        return 2
    print(jsonfile.dumps(config if isinstance(config, dict) else to_dict(config), indent=2))
    return 0


def usage() -> str:
    lines = [
        "usage: mtl COMMAND [key=value ...]   (mtl COMMAND --help lists its keys; --print-config "
        "prints the config it would run with)",
        "",
    ]
    lines += [f"  {name:<20} {command.summary}" for name, command in COMMANDS.items()]
    return "\n".join(lines)


def command_help(name: str) -> str:
    command = COMMANDS[name]
    rows = [
        *command.extra_keys,
        *(_task_keys() if command.task_keys else ()),
        *(row for row in describe_keys(command.config_class()()) if not row[0].endswith(".kind")),
    ]
    return keys_help(f"just {name}", f"{command.summary}.", rows)


def keys_help(usage: str, summary: str, rows: Sequence[tuple[str, str, str]]) -> str:
    """A command's --help: its usage line, its summary, then each key, its default and meaning."""
    width = max(len(f"{key}={default}") for key, default, _ in rows)
    lines = [f"usage: {usage} [key=value ...]", summary, "", "keys (default, meaning):"]
    lines += [
        f"  {f'{key}={default}' if key else '':<{width}}  {text}".rstrip() for key, default, text in rows
    ]
    return "\n".join(lines)


def _command_hint(given: str) -> str:
    # A command is also known by its first word (`trian` is closer to `train` than to `transfer`).
    names = {name.split("-")[0]: name for name in reversed(COMMANDS)} | {name: name for name in COMMANDS}
    close = difflib.get_close_matches(given, names, n=1, cutoff=0.6)
    return f"did you mean {names[close[0]]}?" if close else "the commands are listed above"


POSITIONAL = ("PATH", "FOLDER")  # arguments that are not keys: folders, runs


def refuse_unknown_keys(name: str, args: Sequence[str]) -> None:
    """A command's keys checked against its config before its module is imported (a typo in `just
    transfer` was refused after 3.8 CPU-s of torch and scikit-learn): the check the command makes
    first anyway, on the same arguments, only sooner. Studies and training pass keys on to their
    runs, which are checked there."""
    command = COMMANDS[name]
    if command.passes_training_keys or command.task_keys:
        return
    if any(key not in POSITIONAL for key, _, _ in command.extra_keys):
        return  # keys of its own beyond its config (merge-encoders' run=, a preset=)
    apply_overrides(command.config_class()(), paths_and_keys(args)[1])


def study_help(name: str) -> str:
    """`just study NAME --help`: a built-in study with a command of its own gives that command's
    help; another (compare-negatives, a plugin's) its summary, its own keys, then the runs' keys."""
    from mtl.studies.study import study_named  # the studies' registry (their modules import torch)

    study = study_named(name)
    if name in COMMANDS:
        return command_help(name)
    rows = [*describe_keys(study.config()), COMMANDS["study"].extra_keys[1]]
    return keys_help(f"just study {name}", f"{study.summary}; judged against {study.baseline}.", rows)


def print_help(name: str, args: Sequence[str] = ()) -> int:
    try:
        named = [a for a in args if a not in HELP and "=" not in a]
        print(study_help(named[0]) if name == "study" and named else command_help(name))
    except UserError as error:  # a tool's module absent from an installed copy
        say(f"error: {error}")
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    named = 1 if argv[:1] and argv[0] in HELP else 0  # the command's place: `help <command>`
    if len(argv) > named and argv[named] in ALIASES:
        argv[named] = ALIASES[argv[named]]
    if argv[:1] and argv[0] in HELP:
        if argv[1:2] and argv[1] in COMMANDS:
            return print_help(argv[1])
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        print(usage(), file=sys.stderr)
        if argv:  # after the usage, so that the line about the typo is the last one seen
            say(f"error: unknown command {argv[0]!r}: {_command_hint(argv[0])}")
        return 2
    try:  # before a command's help, too: its choices include what the plugins register
        argv = [argv[0], *plugins.load_for_command(argv[1:])]
    except UserError as error:
        say(f"error: {error}")
        return 2
    if any(arg in HELP for arg in argv[1:]):
        return print_help(argv[0], argv[1:])
    if PRINT_CONFIG in argv[1:]:
        return print_config(argv[0], [a for a in argv[1:] if a != PRINT_CONFIG])
    try:
        refuse_unknown_keys(argv[0], argv[1:])
    except UserError as error:
        say(f"error: {error}")
        return 2
    previous, stopped_by = _stop_on_signals()
    # A log handler that cannot write (W&B's debug log on a full disk) must not print a traceback
    # per record: the write that matters fails too, and says so in one line.
    logging.raiseExceptions = False
    try:
        with printable_stdout():
            COMMANDS[argv[0]].run(argv[1:])
    except UserError as error:
        if not getattr(error, "quiet", False):
            start = "\n" if getattr(error, "after_other_output", False) else ""  # see JobFailed
            rank_says(f"{start}error: {error}")
        return 2
    except KeyboardInterrupt as interrupt:
        rank_says(f"interrupted{': ' + str(interrupt) if str(interrupt) else ''}")
        return 130
    except OSError as error:
        if error.errno not in WRITE_ERRORS:
            raise
        where = f" {error.filename}" if error.filename else ""
        rank_says(
            f"error: could not write{where}: {error.strerror}: free space or choose another out=, then run again"
        )
        return 2
    except Exception as error:
        if isinstance(error, RuntimeError) and _lost_a_peer(error):
            rank = os.environ.get("RANK", "?")
            rank_says(f"error: rank {rank} {LOST_CONTACT} ({_first_line(error)})")
            return LOST_A_PEER
        if stopped_by:
            return _interrupted_midway(stopped_by)
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


# A file that cannot be written, wherever mtl writes one (a run's log, W&B's files, a report):
# the disk or quota is full, the place is read-only or not the user's.
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def run_as_process() -> None:
    """The process's entry point (`python -m mtl`, the `mtl` script): `main()`, then exit.

    A torchrun rank that fails leaves with `os._exit`: at the interpreter's teardown its live
    gloo threads abort the process (SIGABRT), which turned its one-line error into a crash the
    launcher then reported; and destroying the process group could wait on a dead peer.
    """
    try:
        code = main()
    except BrokenPipeError:  # the reader left (`mtl COMMAND --help | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush goes nowhere
        raise SystemExit(141) from None  # as a shell reports a process ended by SIGPIPE
    except KeyboardInterrupt as interrupt:
        # SIGTERM after the command ended, while main() put the signal handlers back (torchrun
        # stopping a surviving rank): said in one line like any other interruption.
        rank_says(f"interrupted{': ' + str(interrupt) if str(interrupt) else ''}")
        code = 130
    if code != 0 and "torch.distributed" in sys.modules:
        import torch.distributed  # loaded already when it matters (the check above); never at start-up

        if torch.distributed.is_available() and torch.distributed.is_initialized():
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(code)
    raise SystemExit(code)


def _lost_a_peer(error: RuntimeError) -> bool:
    from mtl.runtime.distributed import lost_a_peer  # torch: only when a command failed so

    return lost_a_peer(error)


def _first_line(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text.split("] ", 1)[-1].split(". ")[0][:120]  # without gloo's source location and advice


STOPPED_BY = {signal.SIGTERM: "terminated", signal.SIGUSR2: "SLURM's signal before the job's time limit"}


def _stop_on_signals() -> tuple[dict[int, Any], list[str]]:
    """SIGTERM, SLURM's SIGUSR2 before a job's time limit (`--signal`) and a dead sweep's
    PARENT_DIED unwind like Ctrl-C, so temporary files are removed and runs checkpoint;
    PARENT_DIED and SIGUSR2 only once (they may come several times, see interrupts).

    Returns the handlers replaced and the list the stop's reason is appended to when one came.
    """
    stopped_by: list[str] = []

    def handler(signum, frame):
        if signum in (PARENT_DIED, signal.SIGUSR2) and stopped_by:
            return
        if _in_finalizer(frame):
            # An exception out of a __del__ is printed and dropped ("Exception ignored in"): the
            # stop would be lost. Ask again: the handler runs once more after the finalizer.
            os.kill(os.getpid(), signum)
            return
        stopped_by.append(STOPPED_BY.get(signum, "the sweep that started this run ended"))
        raise KeyboardInterrupt(stopped_by[-1])

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGUSR2, PARENT_DIED):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[signum] = signal.signal(signum, handler)
    return previous, stopped_by


def _interrupted_midway(stopped_by: list[str]) -> int:
    """A stop whose KeyboardInterrupt landed where code turns any failure into an error of its
    own (a C extension's import: pandas says `PyCapsule_Import could not import module`, with
    the interrupt dropped): the error is the stop's doing, said as the stop in one line."""
    rank_says(f"interrupted: {stopped_by[0]}")
    return 130


def _in_finalizer(frame) -> bool:
    """Whether the interrupted code is (inside) an object's `__del__`."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


if __name__ == "__main__":
    run_as_process()
