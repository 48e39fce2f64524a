"""`just dashboard`: a saved W&B workspace with mtl's panels, for online users (`wandb-workspaces`).

Sections: one per task of `tasks=` (its curves against its own step), the blocks (the
tasks' smoothed losses and, unsmoothed beside them, `phase/task_id` against the global step;
the phases table), the comparison of runs (Figure 2 as a scatter of each task's best dev
metric against the first task's steps per block, the recovery after switches, bars of the
best results per run), and transfer (each `just transfer` run's scores). The runs shown are
training and transfer runs (W&B's job type), of W&B's group `group=` when given (a sweep's
name, or a preset's), grouped by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl import metrics
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.files import atomic
from mtl.tasks import DEFAULT_TASKS, kind_of, named_config, title_of
from mtl.tracking.tracker import resolve_mode


@dataclass
class DashboardConfig:
    project: str = "mtl"  # the W&B project of the runs
    entity: str | None = None  # W&B entity; None: the API key's default
    group: str | None = None  # only this group's runs (a sweep, e.g. fig2); None: all runs
    name: str = "mtl"  # the saved workspace's name
    spec: str | None = None  # write the workspace's JSON here instead of saving it (works offline)
    tasks: str = ",".join(DEFAULT_TASKS)  # the runs' tasks (names or task files), as train-multitask's tasks=

    def task_metrics(self) -> dict[str, tuple[str, str]]:
        """task -> (its title, the metric that picks its best), in order."""
        found = {}
        for entry in filter(None, (part.strip() for part in self.tasks.split(","))):
            name, task = named_config(entry)
            found[name] = (title_of(name, task.kind, getattr(task, "display", "")), kind_of(task.kind).metric)
        return found


def task_curves(task: str, metric: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(what, metric, plot options) of a task's section, after its smoothed training loss."""
    return [
        (f"dev {metric}", metrics.evaluation(task, "dev", metric), {}),
        (f"training {metric}", metrics.train(task, metric), {}),
        ("learning rate", metrics.of_task(task, "lr"), {"log_y": True}),
        ("gradient norm", metrics.of_task(task, "grad_norm"), {}),
        ("examples/s", metrics.of_task(task, "examples_per_s"), {}),
    ]


# (what, summary key, tasks) of the transfer section: what `just transfer` logs as transfer/<task>/<key>
TRANSFER_PANELS = (
    ("accuracy", "acc", ["MR", "CR", "MPQA", "SUBJ", "SST2", "SST5", "SICK-E", "TREC", "MRPC"]),
    ("Pearson r, relatedness", "pearson", ["SICK-R", "STS-B"]),
    ("Pearson r, STS (all subsets)", "all/pearson", ["STS12", "STS13", "STS14", "STS15", "STS16"]),
)


def workspace(config: DashboardConfig, entity: str) -> Any:
    import wandb_workspaces.expr as expr  # optional: only `just dashboard` needs it
    import wandb_workspaces.reports.v2 as panels
    import wandb_workspaces.workspaces as ws

    tasks = config.task_metrics()
    first = next(iter(tasks))
    sections = [
        ws.Section(
            name=f"{title} ({task})",
            is_open=True,
            panels=[
                panels.LinePlot(
                    title=f"{title} training loss",
                    x=metrics.of_task(task, "step"),
                    y=[metrics.train(task, "loss")],
                    smoothing_factor=0.9,
                    smoothing_show_original=True,
                ),
                *(
                    panels.LinePlot(
                        title=f"{title} {what}", x=metrics.of_task(task, "step"), y=[name], **style
                    )
                    for what, name, style in task_curves(task, metric)
                ),
            ],
        )
        for task, (title, metric) in tasks.items()
    ]
    block_ids = ", ".join(f"{i} {title}" for i, (title, _) in enumerate(tasks.values()))
    sections.append(
        ws.Section(
            name="Blocks",
            is_open=True,
            panels=[
                panels.LinePlot(
                    title="training losses against the global step",
                    x=metrics.GLOBAL_STEP,
                    y=[metrics.train(task, "loss") for task in tasks],
                    smoothing_factor=0.9,
                    smoothing_show_original=True,
                ),
                panels.LinePlot(  # an indicator: smoothing would turn its steps into ramps
                    title=f"the block under way (phase/task_id: {block_ids})",
                    x=metrics.GLOBAL_STEP,
                    y=[metrics.TASK_ID],
                    smoothing_type="none",
                    smoothing_factor=0,
                ),
                panels.WeavePanelSummaryTable(table_name="phases"),  # loss jump and recovery per block
            ],
        )
    )
    block_steps = panels.Config(f"tasks.{first}.steps")
    best_dev = {
        task: metrics.best(metrics.evaluation(task, "dev", metric)) for task, (_, metric) in tasks.items()
    }
    sections.append(
        ws.Section(
            name="Comparison",
            is_open=True,
            panels=[
                *(
                    panels.ScatterPlot(
                        title=f"Figure 2: {title} dev {metric} against {tasks[first][0]} steps per block",
                        x=block_steps,
                        y=panels.SummaryMetric(best_dev[task]),
                        log_x=True,
                    )
                    for task, (title, metric) in tasks.items()
                ),
                panels.BarPlot(
                    title="best dev and test results",
                    metrics=[
                        panels.SummaryMetric(metrics.best(metrics.evaluation(task, split, metric)))
                        for task, (_, metric) in tasks.items()
                        for split in ("dev", "test")
                    ],
                ),
                panels.BarPlot(
                    title="median steps to recover after a block switch",
                    metrics=[panels.SummaryMetric(f"recovery/{task}/median_steps") for task in tasks],
                ),
            ],
        )
    )
    sections.append(
        ws.Section(
            name="Transfer",
            is_open=True,
            panels=[
                *(
                    panels.BarPlot(
                        title=f"transfer {kind} (just transfer)",
                        metrics=[panels.SummaryMetric(f"transfer/{task}/{key}") for task in names],
                    )
                    for kind, key, names in TRANSFER_PANELS
                ),
                panels.ScatterPlot(  # InferSent's Figure 4: equal embedding size (just sweep embedding-size)
                    title="transfer (micro average of dev accuracies) against embedding dimension",
                    x=panels.Config("dim"),
                    y=panels.SummaryMetric("transfer/micro"),
                    log_x=True,
                ),
            ],
        )
    )
    # W&B's own group and job type: runs grouped by a preset's name have no `run.group` in their config.
    shown = [expr.Metric("JobType").isin(["train", "transfer-eval"])]
    if config.group:
        shown.append(expr.Metric("Group") == config.group)
    runs = ws.RunsetSettings(filters=expr.And(*shown), groupby=[expr.Metric("Group")])
    return ws.Workspace(
        entity=entity, project=config.project, name=config.name, sections=sections, runset_settings=runs
    )


def run(config: DashboardConfig) -> str:
    """Save the workspace and return its URL, or write its JSON to `spec` and return that path."""
    if config.spec:
        spec = workspace(config, config.entity or "<entity>")._to_model().model_dump_json(indent=2)
        atomic.write_text(Path(config.spec).expanduser(), spec + "\n", "workspace spec")
        return str(config.spec)
    if resolve_mode("auto") != "online":
        raise UserError(
            "just dashboard saves a workspace on W&B's servers: log in first (wandb login or "
            "WANDB_API_KEY), or write the workspace's JSON with spec=PATH"
        )
    import wandb  # seconds to import: only to save a workspace online

    try:
        entity = config.entity or wandb.Api(timeout=30).default_entity
        saved = workspace(config, entity).save()
    except Exception as error:  # wandb raises its own errors, requests' and pydantic's: all mean "not saved"
        reason = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
        raise UserError(
            f"could not save the workspace on W&B ({reason}): check the network and WANDB_API_KEY, "
            "or write its JSON offline with spec=PATH"
        ) from None
    return saved.url


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto DashboardConfig; run; print what it gives."""
    config = apply_overrides(DashboardConfig(), args)
    where = run(config)
    print(f"workspace {'written to' if config.spec else 'saved:'} {where}")
