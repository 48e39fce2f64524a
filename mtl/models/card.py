"""The files that make a folder a sentence-transformers model besides its weights: the similarity
config and a Hub-ready model card (for the GloVe export and a fine-tuned encoder=hf alike).

The card's YAML is written by huggingface_hub's own `ModelCardData`, so the Hub reads its
base model, datasets, license and scores (`model-index`) as it reads any model's.
"""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtl import metrics
from mtl.files.hub import looks_like_hub_id

# SNLI and SQuAD, the data of the paper's encoders, are both CC BY-SA 4.0; a user training on
# other data names the license at upload (`just push-encoder ... license=`).
DEFAULT_LICENSE = "cc-by-sa-4.0"
HUB_DATASETS = {
    "nli": "stanfordnlp/snli",
    "mnrl": "stanfordnlp/snli",
    "squad": "rajpurkar/squad",
    "squad_ranking": "rajpurkar/squad",
}


@dataclass
class CardFacts:
    """What a card says about an encoder beyond its modules: where it came from and how it scored."""

    name: str  # the run, whose `encoder/` folder this is
    base_model: str | None = None  # the Hub id an encoder=hf run fine-tuned
    datasets: list[str] = field(default_factory=list)  # Hub ids of its training data
    scores: dict[str, float] = field(default_factory=dict)  # best/<task>/<split>/<metric> -> value
    titles: dict[str, str] = field(default_factory=dict)  # task -> its dataset's name (SNLI)
    license: str = DEFAULT_LICENSE
    prompts: dict[str, str] = field(default_factory=dict)  # task -> the prompt it trained with (encoder=hf)
    seen_test_sets: dict[str, dict[str, int]] = field(
        default_factory=dict
    )  # test set -> exact, near, sentences
    fine_tuned_from: str | None = (
        None  # encoder=hf: the model as trained from (a Hub id or a local folder's name)
    )
    settings: list[str] = field(default_factory=list)  # how it was trained, a line each
    # transfer scores of the run's reports: (report, protocol, task, metric, value in points)
    transfer: list[tuple[str, str, str, str, float]] = field(default_factory=list)
    # "task/split" -> what its scores were measured on (metrics.scored_on): a part of the split says so
    scored_on: dict[str, dict[str, Any]] = field(default_factory=dict)


def facts_of(
    name: str,
    config: dict[str, Any],
    scores: dict[str, Any],
    titles: dict[str, str],
    contamination: dict[str, Any] | None = None,
) -> CardFacts:
    """A run's card facts from its recorded config (as config.json holds it), best scores and
    contamination ledger (summary.json's `contamination`)."""
    model = config.get("model", {})
    hub_model = (model.get("options") or {}).get("hf_model") if model.get("encoder") == "hf" else None
    datasets = []
    for task in config.get("tasks", {}).values():
        source = task.get("source") or task.get("corpus")
        if is_hub_id(source):
            datasets.append(source)
        elif task.get("kind") in HUB_DATASETS and not task.get("display"):
            datasets.append(HUB_DATASETS[task["kind"]])  # a local copy of SNLI or SQuAD
        elif source == "squad":  # Quick-Thoughts and Skip-Thought read SQuAD's passages
            datasets.append(HUB_DATASETS["squad"])
    kept = {key: float(value) for key, value in scores.items() if metrics.is_best_evaluation(key)}
    return CardFacts(
        name=name,
        base_model=hub_model if is_hub_id(hub_model) else recorded_hub_id(hub_model),
        fine_tuned_from=(hub_model if is_hub_id(hub_model) else Path(hub_model).name) if hub_model else None,
        settings=training_settings(config, titles),
        datasets=list(dict.fromkeys(datasets)),
        scores={key: value for key, value in kept.items() if not key.endswith("/loss")},
        titles=titles,
        prompts={
            name: task["prompt"] for name, task in config.get("tasks", {}).items() if task.get("prompt")
        },
        scored_on=metrics.scored_on(config, scores),
        seen_test_sets={
            name: counts
            for name, counts in (contamination or {}).get("test_sets", {}).items()
            if counts["exact"] + counts["near"]
        },
    )


def recorded_hub_id(folder: str | None) -> str | None:
    """The Hub id a local model folder was saved from, when its config.json records one of the
    folder's own name (a folder saved from sentence-transformers/all-MiniLM-L6-v2 may instead
    record the model *it* was trained from: then None, and the card names the folder)."""
    if not folder or not (Path(folder) / "config.json").is_file():
        return None
    try:
        recorded = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    if (
        isinstance(recorded, str)
        and looks_like_hub_id(recorded)
        and recorded.split("/")[1] == Path(folder).name
    ):
        return recorded
    return None


def training_settings(config: dict[str, Any], titles: dict[str, str] | None = None) -> list[str]:
    """How the run trained, from its recorded config: tasks, schedule, encoder, vectors, optimizer."""
    model, optim, run = (config.get(key, {}) or {} for key in ("model", "optim", "run"))
    schedule = config.get("schedule", {}) or {}
    tasks = config.get("tasks", {}) or {}
    lines = []
    if tasks:
        described = [
            f"{name} ({(titles or {}).get(name) or task.get('display') or task.get('kind', name)}; {task.get('steps')} steps of "
            f"{task.get('batch')} per block)"
            if task.get("train", True)
            else f"{name} (watched, not trained)"
            for name, task in tasks.items()
            if isinstance(task, dict)
        ]
        lines.append("tasks: " + ", ".join(described))
    if schedule.get("schedule"):
        lines.append(f"schedule: {schedule['schedule']}")
    if model.get("encoder"):
        width = "" if model.get("encoder") == "hf" else f", hidden {model.get('hidden')}"
        lines.append(f"encoder: {model['encoder']}{width}, pooling {model.get('pooling')}")
    if model.get("encoder") != "hf" and (config.get("data", {}) or {}).get("vectors"):
        lines.append(
            f"word vectors: {Path(config['data']['vectors']).name} ({model.get('embeddings', 'frozen')})"
        )
    if optim.get("optim"):
        lines.append(
            f"optimizer: {optim['optim']}, lr {optim.get('lr')}, lr schedule {optim.get('lr_schedule')}, "
            f"stop {optim.get('stop')}"
            + (f", max_steps {optim['max_steps']}" if optim.get("max_steps") else "")
        )
    if run.get("seed") is not None:
        lines.append(f"seed: {run['seed']}")
    return lines


def is_hub_id(source: object) -> bool:
    """An `organization/name` the Hub knows, rather than a path on this machine."""
    return isinstance(source, str) and looks_like_hub_id(source) and not Path(source).expanduser().exists()


def write_card(
    folder: Path, facts: CardFacts, dim: int, modules: list[str], default_prompt: str = ""
) -> None:
    """`config_sentence_transformers.json` (cosine similarity) and the model card README.md;
    `default_prompt`: a text prepended to every sentence (the query and document prompts too)."""
    prompts = {"query": default_prompt, "document": default_prompt} if default_prompt else {}
    _json(folder / "config_sentence_transformers.json", {
        "__version__": {"pytorch": importlib.metadata.version("torch").split("+")[0]},
        "prompts": prompts | facts.prompts,
        "default_prompt_name": "document" if default_prompt else None,
        "similarity_fn_name": "cosine",
    })  # fmt: skip
    (folder / "README.md").write_text(card_text(facts, dim, modules), encoding="utf-8")


def card_text(facts: CardFacts, dim: int, modules: list[str]) -> str:
    from huggingface_hub import ModelCardData  # a second to import: only when a card is written

    data = ModelCardData(
        model_name=facts.name,
        library_name="sentence-transformers",
        pipeline_tag="sentence-similarity",
        tags=["sentence-transformers", "feature-extraction", "sentence-similarity", "mtl"],
        base_model=facts.base_model,
        datasets=facts.datasets or None,
        license=facts.license,
        language="en",
        eval_results=_eval_results(facts) or None,
    )
    scores = "".join(
        f"| {facts.titles.get(task, task)} | {split} | {metric} | {100 * value:.2f} |\n"
        for task, split, metric, value in _scores(facts)
    )
    return (
        f"---\n{data.to_yaml()}\n---\n\n"
        f"# {facts.name}\n\nA sentence encoder trained with mtl (multitask NLI + ClassifSQuAD, Liu et al. "
        f"2018, built on InferSent). It maps a sentence to a {dim}-dimensional vector.\n\n"
        f"Modules: {' → '.join(modules)}.\n\n"
        + (_origin_text(facts))
        + (
            "## Training\n\n" + "".join(f"- {line}\n" for line in facts.settings) + "\n"
            if facts.settings
            else ""
        )
        + (
            "Scores of the exported checkpoint (the one its dev scores chose), in %:\n\n"
            f"| dataset | split | metric | score |\n|---|---|---|---:|\n{scores}\n"
            if scores
            else ""
        )
        + _transfer_text(facts)
        + _contamination_text(facts)
        + "```python\nfrom sentence_transformers import SentenceTransformer\n\n"
        f'model = SentenceTransformer("runs/{facts.name}/encoder")\n'
        'embeddings = model.encode(["A man is playing a guitar."])\n```\n\n'
        + (
            "Its tokenizer splits punctuation and English contractions off words, approximating the "
            "spaCy tokenizer the encoder was trained with; a word outside the exported vocabulary reads "
            "as the unknown word (mtl's `load_encoder` looks it up in the vectors file first). "
            "Needs sentence-transformers 5.0 or later.\n\n"
            if "WordEmbeddings" in modules
            else ""
        )
        + f"License: {facts.license}"
        + (" (that of SNLI and SQuAD, its training data)." if facts.license == DEFAULT_LICENSE else ".")
        + "\n"
    )


def _origin_text(facts: CardFacts) -> str:
    if not facts.fine_tuned_from:
        return ""
    if facts.base_model:
        return f"Fine-tuned from [{facts.base_model}](https://huggingface.co/{facts.base_model}).\n\n"
    return (
        f"Fine-tuned from a local copy of `{facts.fine_tuned_from}` (its Hub id was not recorded: "
        "`just push-encoder ... base_model=ORG/NAME` names it).\n\n"
    )


def _transfer_text(facts: CardFacts) -> str:
    """The run's transfer reports, each with the protocol that scored it."""
    if not facts.transfer:
        return ""
    parts = []
    for report in dict.fromkeys(row[0] for row in facts.transfer):
        rows = [row for row in facts.transfer if row[0] == report]
        table = "".join(f"| {task} | {metric} | {value:.2f} |\n" for _, _, task, metric, value in rows)
        parts.append(
            f"Transfer (`{report}`), {rows[0][1]}:\n\n| task | metric | score |\n|---|---|---:|\n{table}\n"
        )
    return "".join(parts)


def _contamination_text(facts: CardFacts) -> str:
    """The test sets whose sentences the training data holds (mtl's contamination ledger)."""
    if not facts.seen_test_sets:
        return ""
    rows = "".join(
        f"| {name} | {c['exact']:,} | {c['near']:,} | {c['sentences']:,} |\n"
        for name, c in facts.seen_test_sets.items()
    )
    return (
        "Test sets some of whose sentences are in the training data (normalised exact matches, and near "
        "duplicates by MinHash): a score on them is not a zero-shot score.\n\n"
        f"| test set | exact | near | sentences |\n|---|---:|---:|---:|\n{rows}\n"
    )


def _scores(facts: CardFacts) -> list[tuple[str, str, str, float]]:
    """(task, split, metric, value) of each best evaluation, dev before test; a split the run
    scored on a sample (max_eval=) says so, never `test` alone."""
    found = []
    for key, value in facts.scores.items():
        task, split, metric = metrics.without_prefix(key).split("/", 2)
        found.append((task, split, metric, value))
    return sorted(
        (
            (task, split_label(split, metrics.sample_of(facts.scored_on, f"{task}/{split}")), metric, value)
            for task, split, metric, value in found
        ),
        key=lambda row: (row[0], not row[1].startswith("dev"), row[2]),
    )


def split_label(split: str, sample: str) -> str:
    """A split's name, with the part of it a run with max_eval= scored (`metrics.sample_of`)."""
    return f"{split} ({sample})" if sample else split


def _eval_results(facts: CardFacts) -> list:
    from huggingface_hub import EvalResult

    kinds = {"acc": "accuracy", "pearson": "pearsonr", "spearman": "spearmanr"}
    return [
        EvalResult(
            task_type="text-classification" if metric == "acc" else "sentence-similarity",
            dataset_type=_dataset_of(task, facts),
            dataset_name=facts.titles.get(task, task),
            dataset_split=split.replace("dev", "validation", 1) if split.startswith("dev") else split,
            metric_type=kinds.get(metric, metric),
            metric_value=round(100 * value, 2),
        )
        for task, split, metric, value in _scores(facts)
    ] + [
        EvalResult(
            task_type="text-classification" if metric == "acc" else "sentence-similarity",
            dataset_type=f"senteval/{task}",
            dataset_name=f"SentEval {task}",
            metric_type=kinds.get(metric.rsplit("/", 1)[-1], metric),
            metric_value=round(value, 2),
            metric_config=report,
            verified=False,
        )
        for report, _, task, metric, value in facts.transfer
    ]


def _dataset_of(task: str, facts: CardFacts) -> str:
    """The Hub id a task's scores are on, when the card names one; else the task's name."""
    hub = "stanfordnlp/snli" if task == "nli" else None  # ClassifSQuAD is derived: not SQuAD's own
    return hub if hub in facts.datasets else task


def _json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
