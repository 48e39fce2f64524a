"""`just dashboard`: a saved W&B workspace with mtl's panels, for online users (`wandb-workspaces`).

Sections: one per task (its curves against its own step), the blocks (both tasks' losses
and `phase/task_id` against the global step, so block boundaries overlay the curves), and
the comparison of runs (Figure 2 as a scatter of best dev accuracy against NLI steps per
block, the recovery after switches, bars of the best results per run). With `group=` the
workspace shows that group's runs only (a sweep), grouped by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl import atomic, metrics
from mtl.errors import UserError
from mtl.tracking import resolve_mode

TASKS = {"nli": "SNLI", "squad": "ClassifSQuAD"}


@dataclass
class DashboardConfig:
    project: str = "mtl"  # the W&B project of the runs
    entity: str | None = None  # W&B entity; None: the API key's default
    group: str | None = None  # only this group's runs (a sweep, e.g. fig2); None: all runs
    name: str = "mtl"  # the saved workspace's name
    spec: str | None = None  # write the workspace's JSON here instead of saving it (works offline)


def task_curves(task: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(what, metric, plot options) of a task's section, after its smoothed training loss."""
    return [
        ("dev accuracy", metrics.accuracy(task, "dev"), {}),
        ("training accuracy", metrics.train(task, "acc"), {}),
        ("learning rate", metrics.of_task(task, "lr"), {"log_y": True}),
        ("gradient norm", metrics.of_task(task, "grad_norm"), {}),
        ("examples/s", metrics.of_task(task, "examples_per_s"), {}),
    ]


def workspace(config: DashboardConfig, entity: str) -> Any:
    import wandb_workspaces.expr as expr
    import wandb_workspaces.reports.v2 as panels
    import wandb_workspaces.workspaces as ws

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
                    for what, name, style in task_curves(task)
                ),
            ],
        )
        for task, title in TASKS.items()
    ]
    sections.append(
        ws.Section(
            name="Blocks",
            is_open=True,
            panels=[
                panels.LinePlot(
                    title="training losses and the block under way (phase/task_id: 0 NLI, 1 ClassifSQuAD)",
                    x=metrics.GLOBAL_STEP,
                    y=[metrics.train("nli", "loss"), metrics.train("squad", "loss"), metrics.TASK_ID],
                    smoothing_factor=0.9,
                ),
                panels.MediaBrowser(title="phases: loss jump and recovery per block", media_keys=["phases"]),
            ],
        )
    )
    steps_nli = panels.Config("schedule.steps_nli")
    sections.append(
        ws.Section(
            name="Comparison",
            is_open=True,
            panels=[
                panels.ScatterPlot(
                    title="Figure 2: SNLI dev accuracy against NLI steps per block",
                    x=steps_nli,
                    y=panels.SummaryMetric(metrics.best(metrics.accuracy("nli", "dev"))),
                    log_x=True,
                ),
                panels.ScatterPlot(
                    title="Figure 2: ClassifSQuAD dev accuracy against NLI steps per block",
                    x=steps_nli,
                    y=panels.SummaryMetric(metrics.best(metrics.accuracy("squad", "dev"))),
                    log_x=True,
                ),
                panels.BarPlot(
                    title="best dev and test accuracy",
                    metrics=[
                        panels.SummaryMetric(metrics.best(metrics.accuracy("nli", "dev"))),
                        panels.SummaryMetric(metrics.best(metrics.accuracy("nli", "test"))),
                        panels.SummaryMetric(metrics.best(metrics.accuracy("squad", "dev"))),
                    ],
                ),
                panels.BarPlot(
                    title="median steps to recover after a block switch",
                    metrics=[
                        panels.SummaryMetric("recovery/nli/median_steps"),
                        panels.SummaryMetric("recovery/squad/median_steps"),
                    ],
                ),
            ],
        )
    )
    runs = ws.RunsetSettings()
    if config.group:
        runs = ws.RunsetSettings(
            filters=expr.And(expr.Config("run.group") == config.group), groupby=[expr.Config("run.group")]
        )
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
    import wandb

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
