"""The report's multitask sections: the online task affinity of a run (affinity_every=), as
heatmaps per block and the run's mean with a one-line reading, a table of the mean with its
noise floor and TAG's suggested task groupings, and a mixed run's balancer (each task's loss
weight and the cosine of the tasks' encoder gradients against steps)."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from mtl import metrics
from mtl.analysis.held_batches import batch_floor
from mtl.analysis.page import pyplot, smoothed, svg_base64
from mtl.errors import UserError
from mtl.runs import Run

MOST_BLOCKS = 6  # heatmaps per run besides its mean: the first, the last and evenly between


def mean_matrix(rows: list[dict[str, Any]]) -> np.ndarray:
    return np.mean([np.array(row["matrix"], dtype=float) for row in rows], axis=0)


@dataclass
class AffinityMean:
    """A run's affinity over its measurements: the mean, and (for logs that measured it) the
    half-width of its 95% t interval over the held batches (the noise floor)."""

    tasks: list[str]
    mean: np.ndarray  # (T, T)
    half_width: np.ndarray | None  # (T, T); None: a log from before the noise floor
    per_lr: bool  # divided by the lr (TAG's code); older logs: the plain loss ratio
    # batches: every held batch at each measurement; design: some in turn (affinity_each=, the
    # two-way model); bound: an upper bound (affinity_each=1, older logs)
    floor: str = "batches"
    units: int = 0  # the held batches the floor is over

    def within_noise(self) -> np.ndarray:
        """(T, T) whether each entry's interval holds 0 (all False when the floor is unknown)."""
        if self.half_width is None:
            return np.zeros_like(self.mean, dtype=bool)
        return np.abs(self.mean) <= self.half_width


def summarize(rows: list[dict[str, Any]]) -> AffinityMean:
    """The mean over measurements, and its noise floor over independent units: the held batches
    (mtl/analysis/held_batches.py; pooling the measurements as independent shrank the floor by the
    square root of their count, though at unchanged weights they repeat one value). A log from
    before the batches' values were kept has each measurement's standard error only: their mean
    bounds the batch-unit one from above (the spread of a mean over time is at most the mean
    spread), so that floor is kept, and said to be a bound."""
    tasks, mean = list(rows[0]["tasks"]), mean_matrix(rows)
    per_lr = all(r.get("unit") == "per_lr" for r in rows)
    if (floor := batch_floor(rows)) is not None:
        return AffinityMean(tasks, mean, floor.half_width, per_lr, floor.kind, floor.units)
    if all(r.get("stderr") is not None and (r.get("batches") or 0) > 1 for r in rows):
        count = min(int(r["batches"]) for r in rows)
        bound = np.mean([np.array(r["stderr"], dtype=float) for r in rows], axis=0)
        return AffinityMean(tasks, mean, stats.t.ppf(0.975, count - 1) * bound, per_lr, "bound", count)
    return AffinityMean(tasks, mean, None, per_lr)


def toward_targets(
    rows: list[dict[str, Any]], estimator: str = "lookahead"
) -> tuple[AffinityMean, list[str]] | None:
    """The affinity toward the watching tasks (training tasks x targets), with the same noise
    floor over the same held batches, by `estimator` (the lookahead, or one of the run's
    affinity_estimators=); None when the run watched none or did not measure it."""
    if not rows or not rows[0].get("targets"):
        return None
    if estimator != "lookahead":
        if not all(estimator in (r.get("estimators") or {}) for r in rows):
            return None
        columns = [
            {
                "tasks": r["tasks"],
                "matrix": np.mean(r["estimators"][estimator], axis=0).tolist(),
                "per_batch": r["estimators"][estimator],
                "held": r.get("held"),
                "unit": r.get("unit"),
            }
            for r in rows
        ]
        return summarize(columns), list(rows[0]["targets"])
    columns = [
        {
            "tasks": r["tasks"],
            "matrix": r["toward"],
            "per_batch": r.get("toward_per_batch"),
            "held": r.get("held"),
            "unit": r.get("unit"),
        }
        for r in rows
    ]
    return summarize(columns), list(rows[0]["targets"])


def first_toward(summary: AffinityMean, targets: list[str]) -> dict[str, str | None]:
    """Per target, the training task whose step lowers its loss most, among entries above the
    noise floor that help; None where none does (no evidence)."""
    inside, firsts = summary.within_noise(), {}
    for k, target in enumerate(targets):
        helping = [(summary.mean[i, k], task) for i, task in enumerate(summary.tasks) if not inside[i, k]]
        helping = [pair for pair in helping if pair[0] > 0]
        firsts[target] = max(helping)[1] if helping else None
    return firsts


def _acted_on(summary: AffinityMean) -> np.ndarray:
    """The mean with every entry inside the noise floor taken as 0."""
    return np.where(summary.within_noise(), 0.0, summary.mean)


def _score_onto(matrix: np.ndarray, group: Sequence[int], task: int) -> float:
    """What a group gives one of its tasks (TAG): the mean affinity onto it from the group's
    other members; a task alone, its own lookahead Z(t -> t) (its step's effect on itself)."""
    others = [i for i in group if i != task]
    return float(np.mean([matrix[i, task] for i in others])) if others else float(matrix[task, task])


def groupings(summary: AffinityMean) -> Iterator[tuple[int, list[list[str]], float]]:
    """The partition view of TAG's network selection (Fifty et al. 2021, Section 3.2): for each
    number of groups k, the partition of the tasks whose total score (each task's from its group:
    `_score_onto`) is highest. Exhaustive: fine up to 8 tasks (4,140 partitions); entries inside
    the noise floor count as 0."""
    tasks = summary.tasks
    matrix = _acted_on(summary)
    best: dict[int, tuple[float, list[list[int]]]] = {}
    for partition in _partitions(list(range(len(tasks)))):
        score = sum(_score_onto(matrix, group, j) for group in partition for j in group)
        if len(partition) not in best or score > best[len(partition)][0]:
            best[len(partition)] = (score, partition)
    for k in sorted(best):
        score, partition = best[k]
        yield k, [[tasks[i] for i in group] for group in partition], score


MOST_SELECTED = 6  # tasks over which TAG's overlapping selection tries every set of groups


def tag_selection(
    summary: AffinityMean, networks: int
) -> tuple[list[list[str]], dict[str, list[str]], float]:
    """TAG's own network selection (google-research/tag): `networks` groups, which may overlap,
    covering every task; each task is served by the chosen group that scores it best
    (`_score_onto`), and the selection maximises the total of those scores. Exhaustive over the
    2^T - 1 groups (T <= MOST_SELECTED). (groups, each task's serving group, the total)."""
    tasks, matrix = summary.tasks, _acted_on(summary)
    count = len(tasks)
    groups = [g for size in range(1, count + 1) for g in itertools.combinations(range(count), size)]
    scores = np.full((len(groups), count), -np.inf)
    for row, group in enumerate(groups):
        for task in group:
            scores[row, task] = _score_onto(matrix, group, task)
    best_total, best_choice = -np.inf, ()
    for size in range(1, networks + 1):
        for choice in itertools.combinations(range(len(groups)), size):
            total = scores[list(choice)].max(axis=0).sum()
            if total > best_total + 1e-12:  # ties: the fewer networks, then the first found
                best_total, best_choice = total, choice
    chosen = [groups[row] for row in best_choice]
    served = {
        tasks[t]: [tasks[i] for i in max(chosen, key=lambda g: scores[groups.index(g), t])]
        for t in range(count)
    }
    return [[tasks[i] for i in g] for g in chosen], served, float(best_total)


MOST_SETS = 3_000_000  # sets of groups TAG's selection may try: about 20 s at ~150,000 a second here


def selection_sets(tasks: int, networks: int) -> int:
    """How many sets of groups TAG's selection tries: up to `networks` of the 2^T - 1 groups."""
    return sum(math.comb(2**tasks - 1, k) for k in range(1, min(networks, 2**tasks - 1) + 1))


def check_selection_size(tasks: int, networks: int, key: str) -> int:
    """The search's size, refused above MOST_SETS with what would fit (8 tasks at networks=8 searched
    for minutes with nothing said)."""
    sets = selection_sets(tasks, networks)
    if sets > MOST_SETS:
        fits = max((n for n in range(1, networks) if selection_sets(tasks, n) <= MOST_SETS), default=0)
        advice = f"networks={fits} tries {selection_sets(tasks, fits):,}" if fits else "name the groups"
        raise UserError(
            f"{key}: TAG's selection over {tasks} tasks with networks={networks} would try {sets:,} sets of "
            f"groups (the bound is {MOST_SETS:,}, about 20 s): {advice}, or name the groups (groups=a+b,c)"
        )
    return sets


ALONE = -1e6  # the released notebook's score of a task in a group of its own: never chosen alone


def released_tag_selection(
    summary: AffinityMean, networks: int
) -> tuple[list[list[str]], dict[str, list[str]], float]:
    """TAG's network selection as the authors released it (google-research/tag,
    network_selection/TAG_network_selection.ipynb): a group scores each of its tasks by the mean
    affinity onto it from the group's other members, and a task alone at ALONE, so a task is
    served alone only where no grouping covers it; up to `networks` groups, which may overlap,
    maximise the mean over tasks of each task's best score. Groups are enumerated, and ties
    broken (the first found), in the notebook's own order. (groups, each task's serving group,
    the mean score.) `tag_selection` is mtl's variant, which scores a task alone by its own
    lookahead instead."""
    tasks, matrix = summary.tasks, _acted_on(summary)
    count = len(tasks)
    groups = list(_notebook_groups(count))
    scores = np.full((len(groups), count), ALONE)  # a task outside a group never counts there
    for row, group in enumerate(groups):
        for task in group:
            others = [i for i in group if i != task]
            if others:
                scores[row, task] = float(np.mean([matrix[i, task] for i in others]))
    best: list[float | tuple[int, ...]] = [-np.inf, ()]

    def extend(start: int, chosen: tuple[int, ...]) -> None:  # the notebook's select_groups
        if chosen and len({t for row in chosen for t in groups[row]}) == count:
            value = float(np.mean(scores[list(chosen)].max(axis=0)))
            if value > best[0]:  # type: ignore[operator]
                best[0], best[1] = value, chosen
        if len(chosen) == networks:
            return
        for row in range(start, len(groups)):
            extend(row + 1, (*chosen, row))

    extend(0, ())
    chosen_rows = list(best[1])  # type: ignore[arg-type]
    served = {
        tasks[t]: [tasks[i] for i in groups[max(chosen_rows, key=lambda row: scores[row, t])]]
        for t in range(count)
    }
    return [[tasks[i] for i in groups[row]] for row in chosen_rows], served, float(best[0])  # type: ignore[arg-type]


def _notebook_groups(count: int, start: int = 0, path: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    """Every non-empty group of `count` tasks in the order the notebook's gen_task_combinations
    inserts them: depth first, a group of two or more before its extensions, a task alone after
    every group it starts."""
    for task in range(start, count):
        group = (*path, task)
        if path:
            yield group
        yield from _notebook_groups(count, task + 1, group)
        if not path:
            yield group


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in _partitions(rest):
        for index in range(len(smaller)):
            yield [*smaller[:index], [first, *smaller[index]], *smaller[index + 1 :]]
        yield [[first], *smaller]


MOST_GROUPED = 8  # tasks over which every partition is tried


def affinity_table(name: str, rows: list[dict[str, Any]]) -> list[str]:
    """HTML: the run's mean affinity with its interval, ~0 inside the noise floor, and TAG's groupings."""
    summary = summarize(rows)
    tasks = summary.tasks
    unit = "Z(i → j) / lr" if summary.per_lr else "Z(i → j)"
    head = "".join(f"<th>→ {html.escape(t)}</th>" for t in tasks)
    body = _table_rows(summary)
    if summary.half_width is None:
        floor = (
            "no noise floor: the log is from before mtl repeated each measurement; read small values as noise"
        )
    else:
        units = f"the {summary.units} held batches (affinity_batches=)"
        floor = {
            "batches": f"± the 95% t interval over {units}, each batch's mean over the run one unit "
            "(B - 1 degrees of freedom)",
            "design": f"± the 95% t interval over {units}, some taken in turn (affinity_each=): their "
            "offsets compared within measurements, Satterthwaite's degrees of freedom",
            "bound": f"± an upper bound on the 95% t interval over {units}: "
            + (
                "its batches were not measured together enough to tell a batch's offset from how the "
                "affinity moves over training (one per measurement, affinity_each=1, or too few measurements)"
                if all(r.get("per_batch") is not None for r in rows)
                else "the log predates the batches' own values"
            ),
        }[summary.floor] + "; ~0: the interval holds 0, so the sign is noise, never help or harm"
    parts = [
        f"<h2>Task affinity of {html.escape(name)}: mean of {len(rows)} measurements ({unit})</h2>",
        f"<p>Row: the task stepped; column: the task whose loss it changed (the diagonal: a task's "
        f"step on itself); {floor}.</p>",
        f'<div class="wide"><table><tr><th>stepped</th>{head}</tr>{body}</table></div>',
    ]
    if 2 < len(tasks) <= MOST_SELECTED:
        for select, said, value in (
            (
                released_tag_selection,
                "TAG's network selection as released (google-research/tag's notebook): a task alone scores "
                "-1e6, so it is grouped wherever a group covers it",
                "mean",
            ),
            (
                tag_selection,
                "mtl's self-affinity variant (train-groups selection=self): a task alone scored by its own "
                "lookahead on itself, so a task that helps itself most is served alone",
                "total",
            ),
        ):
            lines = []
            for networks in range(1, min(3, len(tasks)) + 1):
                chosen, served, total = select(summary, networks)
                serving = "; ".join(f"{t} by {'+'.join(g)}" for t, g in served.items())
                lines.append(
                    f"{networks} network{'s' * (networks > 1)}: {' | '.join(' + '.join(g) for g in chosen)} "
                    f"({value} {_signed(total)}; {serving})"
                )
            parts.append(
                f"<p>{said}. Groups may overlap; each task is served by the chosen group that scores it best "
                "(the mean affinity onto it from the group's others), entries inside the floor as 0:</p><ul>"
                + "".join(f"<li>{html.escape(line)}</li>" for line in lines)
                + "</ul>"
            )
    if 2 < len(tasks) <= MOST_GROUPED:
        lines = [
            f"{k} group{'s' * (k > 1)}: {' | '.join(' + '.join(g) for g in groups)} (total {_signed(score)})"
            for k, groups, score in groupings(summary)
        ]
        parts.append(
            "<p>The partition view (each task in exactly one group, scored as above):</p><ul>"
            + "".join(f"<li>{html.escape(line)}</li>" for line in lines)
            + "</ul>"
        )
    return parts


def target_table(name: str, rows: list[dict[str, Any]]) -> list[str]:
    """HTML: the training tasks' affinity toward the watching tasks, ~0 inside the noise floor,
    and which training task helps each target most."""
    found = toward_targets(rows)
    if found is None:
        return []
    summary, targets = found
    head = "".join(f"<th>→ {html.escape(t)} (dev)</th>" for t in targets)
    body = _table_rows(summary)
    firsts = first_toward(summary, targets)
    said = "; ".join(
        f"{target}: {first} helps most" if first else f"{target}: no training task helps above the floor"
        for target, first in firsts.items()
    )
    return [
        f"<h2>Affinity of {html.escape(name)} toward its watching tasks: mean of {len(rows)} measurements</h2>",
        "<p>Row: the training task stepped; column: a task that watches the run untrained (train=false), "
        "its loss on held batches of its dev split (a classification target through a linear probe fitted "
        f"at each measurement). ± and ~0 as above ({summary.units} held batches). {html.escape(said)}. "
        "A lookahead is one step's effect: check it against leaving the task out (just affinity-check).</p>",
        f'<div class="wide"><table><tr><th>stepped</th>{head}</tr>{body}</table></div>',
    ]


def _table_rows(summary: AffinityMean) -> str:
    """HTML rows: a row per stepped task, each entry its mean ± the floor, ~0 inside it."""
    inside, body = summary.within_noise(), ""
    for i, source in enumerate(summary.tasks):
        cells = []
        for j, value in enumerate(summary.mean[i]):
            if summary.half_width is None:
                cells.append(_signed(value))
            elif inside[i, j]:
                cells.append(f"~0 ({_signed(value)} ± {summary.half_width[i, j]:.2g})")
            else:
                cells.append(f"{_signed(value)} ± {summary.half_width[i, j]:.2g}")
        body += f"<tr><td>{html.escape(source)}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
    return body


def reading(tasks: list[str], mean: np.ndarray, within: np.ndarray | None = None) -> str:
    """One line on a run's mean affinity: the pair where one task helps another most, and the
    one where it hurts most (`squad helps nli: +0.012 mean; nli hurts squad: -0.003 mean`); pairs
    inside the noise floor (`within`) are never named."""
    pairs = [
        (mean[i, j], a, b)
        for i, a in enumerate(tasks)
        for j, b in enumerate(tasks)
        if i != j and (within is None or not within[i, j])
    ]
    if len(tasks) < 2:
        return "one training task: no pair to measure"
    if not pairs:
        return "no pair's affinity is above its noise floor (~0)"
    best, worst = max(pairs), min(pairs)
    parts = [f"{best[1]} {'helps' if best[0] > 0 else 'hurts'} {best[2]}: {_signed(best[0])} mean"]
    if worst is not best and worst[0] < 0 < best[0]:
        parts.append(f"{worst[1]} hurts {worst[2]}: {_signed(worst[0])} mean")
    return "; ".join(parts)


def _signed(value: float) -> str:
    """+0.012; a value too small for three decimals keeps two significant digits (+1.5e-05)."""
    return f"{value:+.3f}" if abs(value) >= 0.001 or value == 0 else f"{value:+.2g}"


def by_block(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The measurements grouped by the block they fell in, each labelled `block 3 (squad)`."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(int(row.get("block", 0)), []).append(row)
    return [(f"block {block} ({members[0].get('task', '')})", members) for block, members in groups.items()]


def affinity_figure(run: Run) -> tuple[str, str]:
    """(SVG as base64, the reading) of one run: its mean matrix first, then some of its blocks'."""
    rows = run.affinity
    tasks = list(rows[0]["tasks"])
    summary = summarize(rows)
    blocks = by_block(rows)
    if len(blocks) > MOST_BLOCKS:
        chosen = np.linspace(0, len(blocks) - 1, MOST_BLOCKS).round().astype(int)
        blocks = [blocks[i] for i in dict.fromkeys(chosen.tolist())]
    panels = [(f"mean of {len(rows)} measurements", rows), *blocks]
    matrices = [mean_matrix(members) for _, members in panels]
    limit = max(1e-6, max(float(np.abs(m).max()) for m in matrices))
    plt = pyplot()
    columns = min(4, len(panels))
    rows_of_panels = -(-len(panels) // columns)
    size = 1.6 + 0.8 * len(tasks)
    figure, axes = plt.subplots(
        rows_of_panels,
        columns,
        figsize=(size * columns + 1.2, size * rows_of_panels),
        squeeze=False,
        layout="constrained",
    )
    flat = axes.flatten().tolist()
    for axis in flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (title, _), matrix in zip(flat, panels, matrices, strict=False):
        image = axis.imshow(matrix, cmap="RdBu", vmin=-limit, vmax=limit)
        axis.set_xticks(range(len(tasks)), tasks, fontsize=8)
        axis.set_yticks(range(len(tasks)), tasks, fontsize=8)
        axis.set_xlabel("helped task (j)", fontsize=8)
        axis.set_ylabel("stepped task (i)", fontsize=8)
        axis.set_title(title, fontsize=9)
        within = summary.within_noise() if matrix is matrices[0] else np.zeros_like(matrix, dtype=bool)
        for i in range(len(tasks)):
            for j in range(len(tasks)):
                text = "~0" if within[i, j] else f"{matrix[i, j]:+.2g}"
                axis.text(j, i, text, ha="center", va="center", fontsize=8)
    figure.colorbar(image, ax=flat, shrink=0.8, label="Z(i → j) / lr" if summary.per_lr else "Z(i → j)")
    return svg_base64(figure), reading(tasks, matrices[0], summary.within_noise())


def target_figure(run: Run) -> tuple[str, str] | None:
    """(SVG as base64, a line) of a run's affinity toward its watching tasks: training tasks x
    targets, ~0 inside the noise floor; None when it watched none."""
    found = toward_targets(run.affinity)
    if found is None:
        return None
    summary, targets = found
    inside, limit = summary.within_noise(), max(1e-6, float(np.abs(summary.mean).max()))
    plt = pyplot()
    figure, axis = plt.subplots(
        figsize=(2.4 + 1.1 * len(targets), 1.4 + 0.6 * len(summary.tasks)), layout="constrained"
    )
    image = axis.imshow(summary.mean, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    axis.set_xticks(range(len(targets)), targets, fontsize=8)
    axis.set_yticks(range(len(summary.tasks)), summary.tasks, fontsize=8)
    axis.set_xlabel("watching task (its dev loss)", fontsize=8)
    axis.set_ylabel("stepped training task", fontsize=8)
    for i in range(len(summary.tasks)):
        for k in range(len(targets)):
            text = "~0" if inside[i, k] else f"{summary.mean[i, k]:+.2g}"
            axis.text(k, i, text, ha="center", va="center", fontsize=8)
    figure.colorbar(
        image, ax=axis, shrink=0.8, label="Z(i → target) / lr" if summary.per_lr else "Z(i → target)"
    )
    firsts = first_toward(summary, targets)
    said = "; ".join(f"{t}: {first or 'none above the floor'} first" for t, first in firsts.items())
    return svg_base64(figure), said


def balance_figure(run: Run) -> str | None:
    """A mixed run's loss weights and gradient cosines against steps (means of
    `metrics.LOSS_WINDOW` steps); None when the run logged none."""
    steps = [r for r in run.records if any(metrics.is_balance(k) for k in r)]
    keys = sorted({k for r in steps for k in r if metrics.is_balance(k)})
    if not keys:
        return None
    plt = pyplot()
    figure, (weights, cosines) = plt.subplots(1, 2, figsize=(11, 3.6))
    for key in keys:
        points = [(r[metrics.GLOBAL_STEP], r[key]) for r in steps if key in r]
        name = key.removeprefix("balance/")
        axis = cosines if name.startswith("cosine/") else weights
        label = name.removeprefix("cosine/").removesuffix("/weight")
        axis.plot([s for s, _ in points], smoothed([v for _, v in points]), label=label)
    weights.set_title(f"loss weight per task (mean of {metrics.LOSS_WINDOW} steps)", fontsize=10)
    cosines.set_title(
        f"cosine of task gradients on the encoder (mean of {metrics.LOSS_WINDOW} steps)", fontsize=10
    )
    cosines.axhline(0, color="grey", linewidth=0.8)
    for axis in (weights, cosines):
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return svg_base64(figure)


def mixing_figure(run: Run) -> str | None:
    """An online schedule's shares over the run (schedule=aioli|doremi|transfer: each update's
    shares in force, as a stack) and the evidence behind each update; None when it logged none."""
    updates = [r for r in run.records if r.get(metrics.EVENT) == "mixing"]
    tasks = [
        k.removeprefix("mixing/share/")
        for k in (updates[0] if updates else {})
        if k.startswith("mixing/share/")
    ]
    if not tasks:
        return None
    plt = pyplot()
    figure, (shares, evidence) = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
    steps = [r[metrics.GLOBAL_STEP] for r in updates]
    stacked = [[100 * (r.get(f"mixing/share/{task}") or 0.0) for r in updates] for task in tasks]
    shares.stackplot(steps, stacked, labels=tasks, step="post", alpha=0.85)
    shares.set_ylim(0, 100)
    shares.set_title("each task's share of the steps drawn (%), from each update on", fontsize=10)
    for task in tasks:
        points = [(r[metrics.GLOBAL_STEP], r.get(f"mixing/evidence/{task}")) for r in updates]
        points = [(s, v) for s, v in points if v is not None]
        evidence.plot([s for s, _ in points], [v for _, v in points], marker=".", label=task)
    kind = run.config.get("schedule", {}).get("schedule", "")
    said = {"doremi": "excess loss over the reference (clipped at 0)"}.get(
        kind, "normalized mixing-law column sum"
    )
    evidence.set_title(f"evidence at each update: {said}", fontsize=10)
    evidence.axhline(0, color="grey", linewidth=0.8)
    for axis in (shares, evidence):
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    return svg_base64(figure)


def monitor_figure(runs: list[Run], colours: dict[str, Any]) -> str | None:
    """monitor=: each transfer task's score against steps, a panel per metric, every run
    overlaid; None when no run monitored any."""
    keys = sorted(
        {k for run in runs for r in run.records for k in r if metrics.monitored_task(k) is not None}
    )
    if not keys:
        return None
    plt = pyplot()
    columns = min(3, len(keys))
    rows = -(-len(keys) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(4.6 * columns, 3.2 * rows), squeeze=False, layout="constrained"
    )
    flat = axes.flatten().tolist()
    for axis in flat[len(keys) :]:
        axis.set_visible(False)
    for axis, key in zip(flat, keys, strict=False):
        for run in runs:
            points = [
                (r["global_step"], r[key])
                for r in run.records
                if key in r and r.get("phase/event") == "evaluation"
            ]
            if points:
                axis.plot(
                    *zip(*points, strict=True),
                    marker="o",
                    markersize=3,
                    color=colours[run.name],
                    label=run.name,
                )
        axis.set_title(key.removeprefix(f"{metrics.MONITOR}/"), fontsize=10)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    flat[0].legend(fontsize=8)
    return svg_base64(figure)
