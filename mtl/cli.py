"""The commands behind the justfile: `python -m mtl COMMAND key=value ...`."""

from __future__ import annotations

import contextlib
import errno
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mtl import metrics, plugins
from mtl.config import apply_overrides, describe_keys, paths_and_keys
from mtl.console import say
from mtl.errors import UserError
from mtl.launch import LOST_A_PEER, rank_says
from mtl.runs import RunFolder
from mtl.train.interrupts import PARENT_DIED


def build_classifsquad(args: Sequence[str]) -> None:
    from dataset_builders.classifsquad import build

    print(format_build_summary(build(build_config(args))))


def build_config(args: Sequence[str]) -> Any:
    from dataset_builders.classifsquad import BuildConfig
    from mtl.train.presets import build_preset_dir, preset_overrides

    presets = [a.partition("=")[2] for a in args if a.startswith("preset=")]
    base = apply_overrides(
        BuildConfig(), preset_overrides(presets[-1], build_preset_dir()) if presets else []
    )
    return apply_overrides(base, [a for a in args if not a.startswith("preset=")])  # they override it


def train_config(args: Sequence[str]) -> Any:
    """train-multitask's config; with resume=, the run's recorded one with the keys given over it."""
    from mtl.train import run

    resume = [a.partition("=")[2] for a in args if a.startswith("resume=")]
    if resume:
        return run.resumed_config(resume[-1], [a for a in args if not a.startswith("resume=")])
    return run.config_from_args(args)


def format_build_summary(summary: dict) -> str:
    lines = [
        f"ClassifSQuAD written to {summary['out']} in {summary['seconds']:.1f} s "
        f"(vectors {summary['vectors']['file']}, scope {summary['config']['scope']})"
    ]
    for split, stats in summary["splits"].items():
        dropped = ", ".join(f"{k} {v}" for k, v in stats["dropped_questions"].items())
        skipped = ", ".join(f"{k} {v}" for k, v in stats["skipped_pairs"].items())
        lines.append(
            f"  {split}: {stats['examples']:,} examples from {stats['unique_questions']:,} of "
            f"{stats['questions']:,} questions, label 1 fraction {stats['label_answer1_fraction']:.3f}"
        )
        lines.append(f"    dropped questions: {dropped}")
        lines.append(f"    skipped pairs: {skipped}")
    return "\n".join(lines)


def bench_build(args: Sequence[str]) -> None:
    from mtl.bench import build as bench

    config = apply_overrides(bench.BenchBuildConfig(), args)
    print(bench.report(bench.run(config), config))


def bench_train(args: Sequence[str]) -> None:
    from mtl.bench import train as bench

    config = apply_overrides(bench.BenchTrainConfig(), args)
    if config.only != "objectives":
        print(bench.report(bench.run(config)))
    if config.objectives:
        from mtl.bench import objectives

        objectives.run(config)


def sweep_configs(args: Sequence[str]) -> dict[str, Any]:
    """Each member's config, by member name: what `just sweep args` would train."""
    from mtl import sweep as sweeps
    from mtl.config import to_dict

    return {
        member.name: to_dict(train_config(member.overrides)) for member in sweeps.parse(list(args)).members()
    }


def sweep(args: Sequence[str]) -> None:
    from mtl import sweep as sweeps

    spec = sweeps.parse(list(args))
    outcomes = sweeps.run(spec)
    print(sweeps.summary(spec, outcomes))
    if failed := [name for name, outcome in outcomes.items() if outcome.startswith("failed")]:
        raise UserError(f"{len(failed)} of the sweep's runs failed ({', '.join(failed)}): see their logs")


def report(args: Sequence[str]) -> None:
    from mtl import report as reports

    paths, keys = paths_and_keys(args)
    out = reports.run(paths, apply_overrides(reports.ReportConfig(), keys))
    print(f"report written to {out}")


def dashboard(args: Sequence[str]) -> None:
    from mtl import dashboard as dashboards

    config = apply_overrides(dashboards.DashboardConfig(), args)
    where = dashboards.run(config)
    print(f"workspace {'written to' if config.spec else 'saved:'} {where}")


def bench_encode(args: Sequence[str]) -> None:
    from mtl.bench import encode as bench

    print(bench.report(bench.run(apply_overrides(bench.BenchEncodeConfig(), args))))


def bench_loop(args: Sequence[str]) -> None:
    from mtl.bench import loop as bench

    print(bench.report(bench.run(apply_overrides(bench.BenchLoopConfig(), args))))


def bench_ranks(args: Sequence[str]) -> None:
    from mtl.bench import ranks as bench

    config = apply_overrides(bench.BenchRanksConfig(), args)
    print(bench.report(bench.run(config), config.threads))


def bench_hf(args: Sequence[str]) -> None:
    from mtl.bench import hf as bench

    config = apply_overrides(bench.BenchHFConfig(), args)
    print(bench.report(bench.run(config), config))


def bench_transfer(args: Sequence[str]) -> None:
    from mtl.bench import transfer as bench

    config = apply_overrides(bench.BenchTransferConfig(), args)
    print(bench.report(bench.run(config)))


def compare(args: Sequence[str]) -> None:
    from mtl import significance

    paths, keys = paths_and_keys(args)
    config = apply_overrides(significance.SignificanceConfig(), keys)
    out, text = significance.run(paths, config)
    print(text)
    print(f"written to {out} and {out.with_suffix('.json')}")


def decompose(args: Sequence[str]) -> None:
    from mtl import decompose as decomposition

    print(decomposition.run(apply_overrides(decomposition.DecomposeConfig(), args)))


def maxpool(args: Sequence[str]) -> None:
    from mtl import maxpool as picks

    out, text = picks.run(apply_overrides(picks.MaxPoolConfig(), args))
    print(text)
    print(f"page written to {out}")


def neighbours(args: Sequence[str]) -> None:
    from mtl import neighbours as search

    print(search.run(apply_overrides(search.NeighboursConfig(), args)))


def compare_objectives(args: Sequence[str]) -> None:
    from mtl.compare import CompareConfig, compare

    print(f"written to {compare(apply_overrides(CompareConfig(), args))}")


def export_encoder(args: Sequence[str]) -> None:
    from mtl import share

    config = apply_overrides(share.ExportConfig(), args)
    out, kept, dropped = share.export_encoder(config)
    which = "words of the vectors file" if config.vocabulary == "public" else "words of the run's export"
    print(
        f"encoder written to {out} with {kept:,} {which} ({dropped:,} words left out map to the unknown vector)"
    )


def fuzz(args: Sequence[str]) -> None:
    from mtl import fuzz as fuzzing

    print(fuzzing.run(apply_overrides(fuzzing.FuzzConfig(), args)))


def transfer(args: Sequence[str]) -> None:
    from mtl.eval.transfer import report_file, suite

    config = apply_overrides(suite.TransferConfig(), args)
    out, report = suite.run(config)
    print(report_file.markdown(report))
    name = suite.report_name(config)  # transfer-fast, transfer-senteval-mlp, ...: the report's own name
    print(f"written to {out / f'{name}.json'} and {out / f'{name}.md'}")


def train_multitask(args: Sequence[str]) -> None:
    import torch.distributed

    from mtl.train import run

    if int(os.environ.get("RANK", "0")) > 0:  # under torchrun, rank 0 speaks for all
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (for the process's lifetime)
    resume = [a.partition("=")[2] for a in args if a.startswith("resume=")]
    rest = [a for a in args if not a.startswith("resume=")]
    if resume:
        run_dir, summary = run.resume(resume[-1], overrides=rest)
    else:
        run_dir, summary = run.start(run.config_from_args(args), command=args)
    if torch.distributed.is_initialized():  # after a failure a dead peer could make this hang: exit instead
        # Every rank arrives before any tears down: a rank still in gloo when its peer's process
        # exits aborts (SIGABRT), which failed a resumed 2-rank run that had finished its training.
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    print(format_train_summary(run_dir, summary))


def format_train_summary(run_dir, summary: dict) -> str:
    results = ", ".join(
        f"{metrics.without_prefix(k)} {v:.4f}" for k, v in summary.items() if metrics.is_best_evaluation(k)
    )
    steps = ", ".join(
        f"{metrics.without_prefix(k)} {v}" for k, v in summary.items() if k.startswith(metrics.steps(""))
    )
    run = RunFolder(run_dir)
    if (run.pretrained_encoder / "config.json").is_file():  # encoder=hf: a transformers model folder
        exported = f"{run.pretrained_encoder} (Hugging Face and sentence-transformers format)"
    else:
        exported = f"{run.encoder} with its weights in {run.encoder.with_suffix('.safetensors').name}"
        if run.pretrained_encoder.is_dir():
            exported += f", and {run.pretrained_encoder} (sentence-transformers format)"
        elif why := summary.get("sentence_transformers"):
            exported += f" (no sentence-transformers folder: {why})"
    return (
        f"run {run_dir}: stopped by {summary['stop_reason']} after {summary['global_step']} steps ({steps})\n"
        f"  best checkpoint (step {summary[metrics.best('step')]}): {results}\n"
        f"  trainable parameters {summary['params/trainable']:,}; encoder exported to {exported}"
    )


@dataclass(frozen=True)
class Command:
    run: Callable[[Sequence[str]], None]
    summary: str
    config: Callable[[], Any]  # the config whose keys the command takes
    extra_keys: tuple[tuple[str, str, str], ...] = ()
    task_keys: bool = False  # takes tasks= (its rows are built when help is asked: they import the tasks)
    resolve: Callable[[Sequence[str]], Any] | None = None  # the config its arguments make (--print-config)

    def resolved_config(self, args: Sequence[str]) -> Any:
        """The config the command would run with: presets, then its keys; defaults made concrete
        later (from the data, the device) are left as given: a run's config.json has those."""
        if self.resolve is not None:
            return self.resolve(args)
        return apply_overrides(self.config(), paths_and_keys(args)[1])


def _config(module: str, name: str) -> Callable[[], Any]:
    """A factory of the config class `module.name`, imported only when a command needs it."""

    def make() -> Any:
        return getattr(importlib.import_module(module), name)()

    return make


def _task_keys() -> tuple[tuple[str, str, str], ...]:
    from mtl.tasks import DEFAULT_TASKS, KINDS
    from mtl.train.config import legacy_keys

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


COMMANDS: dict[str, Command] = {
    "build-classifsquad": Command(
        build_classifsquad,
        "SQuAD v1.1 -> ClassifSQuAD triples on disk",
        _config("dataset_builders.classifsquad", "BuildConfig"),
        (
            (
                "preset",
                "none",
                "a build preset in experiments/builds/ (classifsquad-paper) or a file; keys override it",
            ),
        ),
        resolve=build_config,
    ),
    "bench-build": Command(
        bench_build,
        "wall time of a full build, vector cache cold and warm",
        _config("mtl.bench.build", "BenchBuildConfig"),
    ),
    "train-multitask": Command(
        train_multitask,
        "multitask training of a shared sentence encoder (SNLI and ClassifSQuAD by default; tasks=)",
        _config("mtl.train.config", "TrainConfig"),
        (
            (
                "preset",
                "none",
                "a preset in experiments/ (cpu-small, paper-blstm2048-nli, ...) or a file (./mine.toml); "
                "keys override it",
            ),
            ("resume", "none", "continue runs/<run> where its last checkpoint left it"),
        ),
        task_keys=True,
        resolve=train_config,
    ),
    "train-distributed": Command(
        lambda args: importlib.import_module("mtl.launch").train_distributed(args),
        "train-multitask over N processes of this machine with torchrun (N first, then its keys)",
        _config("mtl.train.config", "TrainConfig"),
        (("N", "none", "the number of processes (one per GPU, or per share of the CPU cores)"),),
        task_keys=True,
        resolve=lambda args: train_config(args[1:] if args[:1] and args[0].isdigit() else args),
    ),
    "sweep": Command(
        sweep,
        "a grid of training runs in one W&B group (a named sweep such as fig2, or key=v1,v2 axes)",
        _config("mtl.sweep", "SweepConfig"),
        (
            ("NAME", "none", "a sweep in experiments/sweeps/ (fig2); its keys come first"),
            ("KEY", "none", "any train-multitask key; comma-separated values make an axis of the grid"),
        ),
        resolve=sweep_configs,
    ),
    "report": Command(
        report,
        "one HTML page of plots and results from run folders, a sweep folder or a W&B group",
        _config("mtl.report", "ReportConfig"),
        (("PATH", "none", "run folders (runs/<run>) or a sweep folder (runs/sweeps/<sweep>)"),),
    ),
    "dashboard": Command(
        dashboard,
        "a saved W&B workspace with mtl's panels (online), or its JSON with spec=PATH",
        _config("mtl.dashboard", "DashboardConfig"),
    ),
    "bench-train": Command(
        bench_train,
        "a training step of mtl next to the 2018 code's and a bare-LSTM floor, at 300-d",
        _config("mtl.bench.train", "BenchTrainConfig"),
    ),
    "bench-encode": Command(
        bench_encode,
        "sentences/s of encode() next to an InferSent-style encoder, with encode()'s time by stage",
        _config("mtl.bench.encode", "BenchEncodeConfig"),
    ),
    "bench-loop": Command(
        bench_loop,
        "a whole training run's examples/s next to the same steps timed alone",
        _config("mtl.bench.loop", "BenchLoopConfig"),
    ),
    "bench-ranks": Command(
        bench_ranks,
        "training throughput with 1, 2, ... torchrun processes, side by side",
        _config("mtl.bench.ranks", "BenchRanksConfig"),
    ),
    "bench-hf": Command(
        bench_hf,
        "training steps per second of a pretrained transformer (encoder=hf), fp32 and bf16",
        _config("mtl.bench.hf", "BenchHFConfig"),
    ),
    "transfer": Command(
        transfer,
        "SentEval-style transfer evaluation of an encoder",
        _config("mtl.eval.transfer.suite", "TransferConfig"),
    ),
    "compare": Command(
        compare,
        "transfer results of encoders, task by task, with paired bootstrap intervals and a verdict",
        _config("mtl.significance", "SignificanceConfig"),
        (("PATH", "none", "run folders or a sweep folder; runs that differ only in seed= form one encoder"),),
    ),
    "decompose": Command(
        decompose,
        "a run's transfer accuracy by sentence length, OOV rate and label, from its report's items",
        _config("mtl.decompose", "DecomposeConfig"),
    ),
    "maxpool": Command(
        maxpool,
        "which words max pooling picks over a corpus, trained and untrained, with a page of examples",
        _config("mtl.maxpool", "MaxPoolConfig"),
    ),
    "neighbours": Command(
        neighbours,
        "the pool sentences nearest to a query by the cosine of their embeddings",
        _config("mtl.neighbours", "NeighboursConfig"),
    ),
    "export-encoder": Command(
        export_encoder,
        "a run's encoder for sharing: only words of the public vectors file (vocabulary=public)",
        _config("mtl.share", "ExportConfig"),
    ),
    "fuzz": Command(
        fuzz,
        "every reader of user files fed damaged copies: each must read or refuse in one line",
        _config("mtl.fuzz", "FuzzConfig"),
    ),
    "compare-objectives": Command(
        compare_objectives,
        "transfer each run of a sweep over objectives; a table and a page of score against time",
        _config("mtl.compare", "CompareConfig"),
    ),
    "bench-transfer": Command(
        bench_transfer,
        "wall time of the transfer suite",
        _config("mtl.bench.transfer", "BenchTransferConfig"),
    ),
}

HELP = ("--help", "-h", "help")
PRINT_CONFIG = "--print-config"


def print_config(name: str, args: Sequence[str]) -> int:
    """Print the config `name args` would run with, as JSON, and run nothing."""
    from mtl import jsonfile
    from mtl.config import to_dict

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
        *(row for row in describe_keys(command.config()) if not row[0].endswith(".kind")),
    ]
    width = max(len(f"{key}={default}") for key, default, _ in rows)
    lines = [f"usage: just {name} [key=value ...]", f"{command.summary}.", "", "keys (default, meaning):"]
    lines += [
        f"  {f'{key}={default}' if key else '':<{width}}  {text}".rstrip() for key, default, text in rows
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in HELP:
        if argv[1:2] and argv[1] in COMMANDS:
            print(command_help(argv[1]))
            return 0
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        print(usage(), file=sys.stderr)
        return 2
    try:  # before a command's help, too: its choices include what the plugins register
        argv = [argv[0], *plugins.load_for_command(argv[1:])]
    except UserError as error:
        say(f"error: {error}")
        return 2
    if any(arg in HELP for arg in argv[1:]):
        print(command_help(argv[0]))
        return 0
    if PRINT_CONFIG in argv[1:]:
        return print_config(argv[0], [a for a in argv[1:] if a != PRINT_CONFIG])
    previous = _stop_on_signals()
    # A log handler that cannot write (W&B's debug log on a full disk) must not print a traceback
    # per record: the write that matters fails too, and says so in one line.
    logging.raiseExceptions = False
    try:
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
    except RuntimeError as error:
        from mtl.distributed import lost_a_peer

        if not lost_a_peer(error):
            raise
        rank = os.environ.get("RANK", "?")
        rank_says(f"error: rank {rank} lost contact with another process of the job ({_first_line(error)})")
        return LOST_A_PEER
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
    code = main()
    if code != 0 and "torch.distributed" in sys.modules:
        import torch.distributed

        if torch.distributed.is_available() and torch.distributed.is_initialized():
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(code)
    raise SystemExit(code)


def _first_line(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text.split("] ", 1)[-1].split(". ")[0][:120]  # without gloo's source location and advice


def _stop_on_signals() -> dict[int, Any]:
    """SIGTERM and a dead sweep's PARENT_DIED unwind like Ctrl-C, so temporary files are removed
    and runs checkpoint; PARENT_DIED only once (it may come several times, see interrupts)."""
    unwinding = False

    def handler(signum, frame):
        nonlocal unwinding
        if signum == PARENT_DIED and unwinding:
            return
        unwinding = True
        raise KeyboardInterrupt(
            "terminated" if signum == signal.SIGTERM else "the sweep that started this run ended"
        )

    previous = {}
    for signum in (signal.SIGTERM, PARENT_DIED):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[signum] = signal.signal(signum, handler)
    return previous


if __name__ == "__main__":
    run_as_process()
