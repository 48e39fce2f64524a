"""The commands behind the justfile: `python -m mtl COMMAND key=value ...`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from mtl.config import apply_overrides
from mtl.errors import UserError


def build_classifsquad(args: Sequence[str]) -> None:
    from dataset_builders.classifsquad import BuildConfig, build

    config = apply_overrides(BuildConfig(), args)
    summary = build(config)
    print(format_build_summary(summary))


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
    print(bench.report(bench.run(config)))


def bench_transfer(args: Sequence[str]) -> None:
    from mtl.bench import transfer as bench

    config = apply_overrides(bench.BenchTransferConfig(), args)
    print(bench.report(bench.run(config)))


def transfer(args: Sequence[str]) -> None:
    from mtl.eval.transfer import suite

    config = apply_overrides(suite.TransferConfig(), args)
    out, report = suite.run(config)
    print(suite.markdown(report))
    print(f"written to {out / 'transfer.json'} and {out / 'transfer.md'}")


def train_multitask(args: Sequence[str]) -> None:
    from mtl.train import run

    resume = [a.partition("=")[2] for a in args if a.startswith("resume=")]
    rest = [a for a in args if not a.startswith("resume=")]
    if resume:
        run_dir, summary = run.resume(resume[-1], overrides=rest)
    else:
        run_dir, summary = run.start(run.config_from_args(args), command=args)
    print(format_train_summary(run_dir, summary))


def format_train_summary(run_dir, summary: dict) -> str:
    results = ", ".join(
        f"{k.removeprefix('best/')} {v:.4f}"
        for k, v in summary.items()
        if k.startswith("best/") and k.endswith("/acc")
    )
    steps = ", ".join(f"{k.removeprefix('steps/')} {v}" for k, v in summary.items() if k.startswith("steps/"))
    return (
        f"run {run_dir}: stopped by {summary['stop_reason']} after {summary['global_step']} steps ({steps})\n"
        f"  best checkpoint (step {summary['best/step']}): {results}\n"
        f"  trainable parameters {summary['params/trainable']:,}; encoder exported to {run_dir / 'encoder.pt'}"
    )


COMMANDS: dict[str, Callable[[Sequence[str]], None]] = {
    "build-classifsquad": build_classifsquad,
    "bench-build": bench_build,
    "train-multitask": train_multitask,
    "bench-train": bench_train,
    "transfer": transfer,
    "bench-transfer": bench_transfer,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: mtl {{{','.join(COMMANDS)}}} [key=value ...]", file=sys.stderr)
        return 2
    try:
        COMMANDS[argv[0]](argv[1:])
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        print(f"interrupted{': ' + str(interrupt) if str(interrupt) else ''}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
