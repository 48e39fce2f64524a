"""`just study compare-batches`: in-batch ranking over two sources (or more), each batch from one
source (homogeneous, sentence-transformers' default for several datasets) against batches that
mix them, at equal compute with seeds, judged on transfer. Sentence-transformers' users ask
which (its issue 3243), as FlagEmbedding's ask whether to mix two domains.

    just study compare-batches preset=cpu-small tasks=mnrl,squad_ranking squad_ranking.max_train=3300 \
        budget=steps:300 seeds=3 transfer_tasks=MR,CR,TREC,STS14

Both arms see the same examples at the same rate. `homogeneous` draws each step's task in
proportion to its training examples (schedule=proportional), its batch all from that task.
`mixed` trains one task, `union`, on every ranking task's training triples together (as each run
reads them: after max_train= and subsample=), written once to the study's folder with its task
file, so a batch holds each source in the same proportion on average. Every run holds every task:
each arm watches the other's untrained (train=false), so both measure the same dev scores. Batches
are a plain shuffle in both (bucket=false): length bucketing would sort the sources apart. The
record gives each arm's false-negative share per task (`false_negatives/<task>`, logged at each
run's start).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.files import atomic
from mtl.jobs.member import Member
from mtl.runs import RunFolder, read_metrics, read_summary
from mtl.studies.arms import with_task
from mtl.studies.study import Study, StudyConfig, register_study
from mtl.tasks import build_task
from mtl.train.config.command_line import config_from_args
from mtl.train.config.inputs import resolve_inputs
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import subsampled

RANKING = ("mnrl", "squad_ranking")  # kinds scored by one loss: rankings of (anchor, positive, negative)
UNION = "union"  # the mixed arm's task: <out>/union.toml, training on <out>/union-triples.tsv
# The ranking keys a batch's loss and step read, copied into the union's task file (they must be
# equal among the sources: a mixed batch is one loss at one learning rate)
LOSS_KEYS = (
    "batch",
    "scale",
    "in_batch_negatives",
    "matryoshka",
    "matryoshka_weights",
    "weight",
    "lr",
    "prompt",
    "mini_batch",
)


def ranking_tasks(train: list[str]) -> list[str]:
    """The run's trained ranking tasks, checked to be one loss on one batch: the union is a batch of either."""
    run = config_from_args(train)
    ranked = [name for name in run.training_tasks if run.tasks[name].kind in RANKING]
    if len(ranked) < 2:
        raise UserError(
            "compare-batches mixes in-batch ranking tasks: give two or more among tasks= "
            f"(tasks=mnrl,squad_ranking); this run trains {', '.join(ranked) or 'none'}"
        )
    if UNION in run.tasks:
        raise UserError(f"compare-batches adds a task named {UNION}: rename the run's task {UNION}")
    for key in (*LOSS_KEYS, "hard_negatives"):
        values = {name: getattr(run.tasks[name], key) for name in ranked}
        if len(set(map(str, values.values()))) > 1:
            shown = ", ".join(f"{name}.{key}={value}" for name, value in values.items())
            raise UserError(f"compare-batches: {shown}: a mixed batch is one loss, so give them one {key}=")
    if not run.tasks[ranked[0]].hard_negatives:
        raise UserError(
            f"compare-batches writes the mixed arm's triples as anchor<TAB>positive<TAB>negative: leave "
            f"{ranked[0]}.hard_negatives at true"
        )
    if given := [name for name in ranked if run.tasks[name].prob is not None]:
        raise UserError(
            f"{given[0]}.prob=: compare-batches draws each task by its examples, as the mixed batch holds "
            "them; leave prob= out (cut a source with max_train= or subsample=)"
        )
    return ranked


def union_of(run: TrainConfig, ranked: list[str]) -> tuple[LabelledTexts, dict[str, int]]:
    """Every ranking task's training triples as a run of `run` (its inputs resolved) reads them
    (after max_train= and subsample=), one after the other, and how many each gave."""
    columns: list[list[str]] = [[], [], []]
    counts = {}
    for name in ranked:
        config = run.tasks[name]
        examples = build_task(name, config).load_first("train", config.max_train)
        assert examples is not None  # a ranking task always has training triples
        if config.subsample < 1:
            examples = subsampled(name, {"train": examples}, config.subsample, config.subsample_seed)["train"]
        for column, texts in zip(columns, examples.columns, strict=True):
            column += texts
        counts[name] = len(examples)
    return LabelledTexts(columns, [0] * len(columns[0])), counts


def triples_text(triples: LabelledTexts) -> str:
    """Anchor<TAB>positive<TAB>negative lines, as `mnrl.triples=` reads them back: a sentence
    holding a tab or a line break, which would not read back, is refused."""
    lines = []
    for row in zip(*triples.columns, strict=True):
        if any("\t" in text or "\n" in text or "\r" in text for text in row):
            raise UserError(
                f"compare-batches: a training sentence holds a tab or line break: {row[0][:60]!r}"
            )
        lines.append("\t".join(text.strip() for text in row))
    return "\n".join(lines) + "\n"


def union_task_file(run: TrainConfig, ranked: list[str], triples: Path) -> str:
    """The union's task file: an mnrl task on `triples` with the sources' loss keys, scored on the
    SNLI the first mnrl source reads (its folder and splits; SNLI's own where none is mnrl)."""
    lines = ['kind = "mnrl"', f"triples = {json.dumps(str(triples))}"]
    snli = next((run.tasks[name] for name in ranked if run.tasks[name].kind == "mnrl"), None)
    for key in ("source", "dev_split", "test_split") if snli is not None else ():  # its triples train
        if getattr(snli, key) is not None:
            lines.append(f"{key} = {json.dumps(getattr(snli, key))}")
    for key in LOSS_KEYS:
        value = getattr(run.tasks[ranked[0]], key)
        if value is not None and value != "":
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def false_negatives(member: Member) -> dict[str, float]:
    """The run's logged `false_negatives/<task>` shares (at its start, step 0)."""
    for record in read_metrics(RunFolder(member.run_dir).metrics):
        found = {k.split("/", 1)[1]: v for k, v in record.items() if k.startswith("false_negatives/")}
        if found:
            return found
    return {}


@register_study
class CompareBatches(Study):
    name = "compare-batches"
    summary = "in-batch ranking over several sources: each batch from one source against batches mixing them"
    baseline = "homogeneous"
    config = StudyConfig
    equal_compute = (
        "every run trained the whole budget with stop=max_steps, each source at the same expected "
        "share of examples, batches shuffled without length bucketing"
    )

    def arm_keys(self) -> tuple[str, ...]:
        return ("schedule", "bucket")

    def training_keys(self, config: StudyConfig, train: list[str]) -> list[str]:
        self.ranked = ranking_tasks(train)  # a key that cannot mix stops the study before any work
        return train

    def prepare(self, config: StudyConfig, train: list[str], out: Path) -> list[str]:
        """The union's triples and task file written to the study's folder (the same files on every
        resume: the runs record the triples' digest, so a changed source is refused, never trained
        on unseen), and the union added to every run's tasks (the homogeneous arm watches it)."""
        run = resolve_inputs(config_from_args(train))
        union, self.sources = union_of(run, self.ranked)
        triples = out / f"{UNION}-triples.tsv"
        out.mkdir(parents=True, exist_ok=True)
        atomic.write_text(triples, triples_text(union), "compare-batches triples")
        task_file = out / f"{UNION}.toml"
        atomic.write_text(task_file, union_task_file(run, self.ranked, triples), "compare-batches task file")
        return with_task(train, str(task_file))

    def arms(self, config: StudyConfig, train: list[str]) -> dict[str, list[str]]:
        shared = ["schedule=proportional", "bucket=false"]
        return {
            "homogeneous": [*shared, f"{UNION}.train=false"],
            "mixed": [*shared, *(f"{name}.train=false" for name in self.ranked)],
        }

    def described(
        self, config: StudyConfig, train: list[str], found: list[Member], kept: list[Member]
    ) -> dict:
        shares: dict[str, dict[str, list[float]]] = {}
        examples: dict[str, list[int]] = {}
        for member in kept:
            for task, share in false_negatives(member).items():
                shares.setdefault(member.arm, {}).setdefault(task, []).append(share)
            summary = read_summary(RunFolder(member.run_dir).summary) or {}
            examples.setdefault(member.arm, []).append(
                sum(v for k, v in summary.items() if k.startswith("examples/"))
            )
        return {
            **super().described(config, train, found, kept),
            # equal steps; a batch that no_duplicates= cut short holds fewer examples, most where one
            # source repeats its sentences (the arms' batches conflict differently)
            "examples_per_run": {arm: float(np.mean(counts)) for arm, counts in examples.items()},
            "union": {"file": f"{UNION}-triples.tsv", "sources": self.sources},
            "false_negatives": {
                arm: {task: float(np.mean(values)) for task, values in by_task.items()}
                for arm, by_task in shares.items()
            },
        }

    def markdown(self, result: dict) -> str:
        return super().markdown(result) + "\n" + "\n".join(composition_lines(result)) + "\n"

    def page(self, result: dict) -> str | None:
        page = super().page(result)
        assert page is not None  # judged on transfer: the base writes the verdicts' page
        rows = "".join(
            f"<tr><td>{html.escape(arm)}</td><td>{html.escape(task)}</td><td>{100 * share:.4f}%</td></tr>"
            for arm, by_task in result["false_negatives"].items()
            for task, share in by_task.items()
        )
        section = (
            f"<h2>Batches</h2><p>{html.escape(composition_lines(result)[2])}</p>"
            '<div class="wide"><table><tr><th>arm</th><th>task</th><th>in-batch false negatives '
            f"(mean over seeds)</th></tr>{rows}</table></div>"
        )
        return page.replace("</body>", section + "</body>")

    def tables(self, result: dict) -> dict[str, tuple[list[str], list[list[Any]]]]:
        rows = [
            [arm, task, share]
            for arm, by_task in result["false_negatives"].items()
            for task, share in by_task.items()
        ]
        return {**super().tables(result), "false_negatives": (["arm", "task", "share"], rows)}


def composition_lines(result: dict) -> list[str]:
    """The batches' makeup: the union's sources, then each arm's false-negative share per task."""
    union = result["union"]
    sources = union["sources"]
    total = sum(sources.values())
    shown = ", ".join(f"{task} {count:,} ({100 * count / total:.1f}%)" for task, count in sources.items())
    lines = [
        "## Batches",
        "",
        f"The mixed arm trains the task {UNION} on {union['file']}, {total:,} triples: {shown}; "
        "the homogeneous arm draws each step's task in the same proportions (each arm watches the "
        "other's tasks untrained). Training examples per run (mean over seeds; equal steps, but "
        "no_duplicates= cuts a batch short where its sentences repeat): "
        + ", ".join(f"{arm} {count:,.0f}" for arm, count in result["examples_per_run"].items())
        + ".",
        "",
        "| arm | task | in-batch false negatives (mean over seeds) |",
        "|---|---|---:|",
    ]
    for arm, by_task in result["false_negatives"].items():
        lines += [f"| {arm} | {task} | {100 * share:.4f}% |" for task, share in by_task.items()]
    return lines
