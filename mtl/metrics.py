"""Every metric name mtl writes, in one place: the trainer writes them, and the report, dashboard,
sweep summary, CLI summary, lr policy and benches read them.

    <task>/train/loss, <task>/train/<metric>  each step of a task (the task's metric: acc)
    <task>/lr, <task>/grad_norm, <task>/examples_per_s
    <task>/step                              the task's own step count (x axis of its charts)
    <task>/<split>/<metric>                  evaluations (dev, test)
    best/<key>                               the best checkpoint's values (best/step, best/nli/dev/acc)
    steps/<task>                             a finished run's steps per task (summary.json)
    phase/<key>                              block, epoch, evaluation and checkpoint events
    mixed/train/loss, mixed/grad_norm        schedule=mixed: the update's weighted loss, its norm
    balance/<task>/weight                    schedule=mixed: the weight a task's loss had
    balance/cosine/<a>~<b>                   schedule=mixed: cosine of two tasks' encoder gradients
    monitor/<transfer task>/<metric>         monitor=: a transfer task's score at each dev evaluation

It also holds the one answer to which way a metric is better, by its name (the last part of a
key): checkpoint selection, early stopping, the lr shrink, W&B summaries, report rankings and
compare verdicts all ask `higher_is_better`.
"""

from __future__ import annotations

GLOBAL_STEP = "global_step"
EVENT = "phase/event"  # block_start, block_end, epoch_end, evaluation, checkpoint, diverged, finished
TASK_ID = "phase/task_id"  # the task of the block under way, on any chart
LOSS_WINDOW = 20  # steps a smoothed loss averages over (the phases table, the report's curves)
MIXED = "mixed"  # what a schedule=mixed step's own values are logged under (mixed/train/loss)
MONITOR = "monitor"  # what monitor='s transfer scores are logged under (monitor/STS14/spearman)


def train(task: str, name: str) -> str:
    """A training step's value: `nli/train/loss`, `nli/train/acc`."""
    return f"{task}/train/{name}"


def evaluation(task: str, split: str, metric: str) -> str:
    """An evaluation's value of a task's metric: `nli/dev/acc`, `squad/test/acc`."""
    return f"{task}/{split}/{metric}"


def accuracy(task: str, split: str) -> str:
    """An evaluation's accuracy: `nli/dev/acc`, `squad/test/acc`."""
    return evaluation(task, split, "acc")


def of_task(task: str, name: str) -> str:
    """A per-task value that belongs to no split: `nli/step`, `nli/lr`, `nli/grad_norm`."""
    return f"{task}/{name}"


def is_balance(key: str) -> bool:
    """What a schedule=mixed step's balancer decided: `balance/nli/weight`, `balance/cosine/nli~squad`."""
    return key.startswith("balance/")


def balance_weight(task: str) -> str:
    """The weight `task`'s loss had in a schedule=mixed step (`balance/nli/weight`)."""
    return f"balance/{task}/weight"


def balance_cosine(a: str, b: str) -> str:
    """The cosine of two tasks' gradients on the shared encoder in a mixed step (`balance/cosine/nli~squad`)."""
    return f"balance/cosine/{a}~{b}"


def monitored(task: str, metric: str) -> str:
    """A transfer task's score at a dev evaluation (monitor=): `monitor/STS14/spearman`."""
    return f"{MONITOR}/{task}/{metric}"


def monitored_task(key: str) -> str | None:
    """The transfer task of a `monitor/<task>/<metric>` key; None for any other key."""
    parts = key.split("/")
    return parts[1] if len(parts) == 3 and parts[0] == MONITOR else None


def best(key: str) -> str:
    """The best checkpoint's value of `key` (`best/step`, `best/nli/dev/acc`)."""
    return f"best/{key}"


def is_evaluation(key: str) -> bool:
    """`<task>/<split>/<metric>` of a dev or test split: `nli/dev/acc`, `qt/dev/loss`."""
    parts = key.split("/")
    return len(parts) == 3 and parts[1] in ("dev", "test")


def is_best_evaluation(key: str) -> bool:
    """`best/<task>/<split>/<metric>`: an evaluation of the best checkpoint (not `best/step`)."""
    return key.startswith("best/") and key.count("/") == 3


def examples(task: str) -> str:
    """A finished run's count of training examples of `task` (`examples/nli`)."""
    return f"examples/{task}"


def steps(task: str) -> str:
    """A finished run's step count of `task` (`steps/nli`)."""
    return f"steps/{task}"


def phase(name: str) -> str:
    """An event record's field (`phase/task`, `phase/block`, `phase/eval_seconds`)."""
    return f"phase/{name}"


def without_prefix(key: str) -> str:
    """`nli/dev/acc` for `best/nli/dev/acc`, `nli` for `steps/nli`: how summaries print a key."""
    return key.split("/", 1)[1] if key.startswith(("best/", "steps/")) else key


# Metrics where a lower value is better; every other (acc, recall_at_1, pearson, spearman, f1)
# is higher-is-better. A plugin's task or transfer task with a new lower-is-better metric says so
# with `register_direction`.
_LOWER_IS_BETTER = {"loss", "ppl", "mse", "mae", "error", "kl"}


def register_direction(metric: str, higher_is_better: bool) -> None:
    """Declare which way `metric` (a bare name: `wer`) is better, for every reader of it."""
    (_LOWER_IS_BETTER.discard if higher_is_better else _LOWER_IS_BETTER.add)(metric)


def metric_name(key: str) -> str:
    """The metric a key is of: `ppl` for `best/st/dev/ppl`, `acc` for `acc`."""
    return key.rsplit("/", 1)[-1]


def higher_is_better(key: str) -> bool:
    """Whether a larger value of the metric `key` (a name or a whole key) is the better one."""
    return metric_name(key) not in _LOWER_IS_BETTER


def signed(key: str, value: float) -> float:
    """`value` turned so that larger is better (a perplexity negated): what rankings compare."""
    return value if higher_is_better(key) else -value


def is_better(key: str, value: float, than: float | None) -> bool:
    """Whether `value` of the metric `key` beats `than` (None: nothing to beat)."""
    return than is None or signed(key, value) > signed(key, than)


def wandb_summary(key: str) -> str:
    """What a W&B run's summary keeps of the metric `key`: its best value, whichever way that is."""
    return "max" if higher_is_better(key) else "min"


def is_fraction(key: str) -> bool:
    """Whether a value of `key` is a fraction that reports show as a percentage (acc, recall, a
    correlation), rather than a value shown as it is (a perplexity, a loss)."""
    return higher_is_better(key)


def shown(key: str, value: float) -> str:
    """A metric's value as every command prints it: a fraction in points (`nli/dev/acc 69.01`, the
    scale of the pages, `just compare` and the transfer report), any other value as it is
    (`nli/dev/loss 0.7323`)."""
    return f"{100 * value:.2f}" if is_fraction(key) else f"{value:.4f}"


SCORED_ON = "scored_on"  # summary.json: "task/split" -> what each dev and test score was measured on


def scored_on(config: dict, summary: dict) -> dict[str, dict]:
    """What each dev and test score of a run was measured on: "task/split" -> examples, of (the
    split's size; None where unknown) and sampled (a part of the split, not the whole). summary.json
    says (from 2026-11-29); an older run with max_eval= scored every dev and test split on a
    seeded sample of at most that many (examples None, at_most the bound), test too unless its
    config says sample_test=false; without max_eval=, every split whole."""
    recorded = summary.get(SCORED_ON) if isinstance(summary, dict) else None
    if isinstance(recorded, dict):
        return recorded
    data = config.get("data") if isinstance(config, dict) else None
    bound = data.get("max_eval") if isinstance(data, dict) else None
    if not isinstance(bound, int) or isinstance(bound, bool):
        return {}
    tasks = config.get("tasks") if isinstance(config.get("tasks"), dict) else {}
    splits = ("dev", "test") if data.get("sample_test", True) else ("dev",)
    part = {"examples": None, "of": None, "sampled": True, "at_most": bound}
    return {f"{task}/{split}": part for task in tasks for split in splits}


def sample_of(scored: dict[str, dict], key: str) -> str:
    """How a sampled score (`key`: `nli/test/acc`, `best/nli/test/acc`) was measured ("a seeded
    sample of 500 of 9,824"), or "" for a score on the whole split."""
    task, split, *_ = without_prefix(key).split("/") + ["", ""]
    entry = scored.get(f"{task}/{split}")
    if not isinstance(entry, dict) or not entry.get("sampled"):
        return ""
    if entry.get("at_most"):
        return f"a seeded sample of at most {entry['at_most']:,}"
    if entry.get("of") is None:
        return f"the first {entry['examples']:,} examples"
    return f"a seeded sample of {entry['examples']:,} of {entry['of']:,}"
