"""ClassifSQuAD (Liu et al. 2018, Section 2): (question, answer1, answer2) -> is answer1 correct?

From SQuAD v1.1: tokenize and lowercase, drop questions with out-of-vocabulary tokens,
take each question's longest in-vocabulary answer and drop it when shorter than
`min_answer_tokens`, then pair every kept answer with the answers of the other questions
of the same article (or paragraph), skipping pairs where one answer contains the other.
"""

from __future__ import annotations

import gc
import json
import os
import shlex
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm.auto import tqdm

from mtl.config import AtLeast0, AtLeast1, apply_overrides, flattened
from mtl.console import progress_stream
from mtl.data.classifsquad import COLUMNS, LABEL_NAMES, SENTENCES, describe_folder, is_build, to_dataset_dict
from mtl.data.squad import SPLITS as SQUAD_SPLITS
from mtl.data.squad import Article, load_squad, resolve_squad_source
from mtl.errors import UserError
from mtl.files import jsonfile
from mtl.files.atomic import check_output_dir, write_folder
from mtl.files.locks import FolderLock, process_alive
from mtl.text.coverage import Coverage
from mtl.text.token_cache import cached_tokenize
from mtl.text.tokenizer import make_tokenizer
from mtl.text.vectors import content_digest, load_vectors, resolve_vectors_path
from mtl.tracking.tracker import Tracker
from mtl.train.config.presets import build_preset_dir, preset_overrides

DROP_REASONS = (
    "question_oov",
    "answer_oov",
    "answer_too_short",
    "duplicate_question",
    "duplicate_answer",
    "no_negatives",
)
SAMPLE_ROWS = 20


@dataclass
class BuildConfig:
    squad: str | None = None  # folder with the v1.1 JSON files, or a Hub id; None: MTL_DATA_DIR or Hub
    vectors: str | None = None  # GloVe file; None: MTL_VECTORS, MTL_DATA_DIR/glove, or download
    out: str = "data/classifsquad"  # output folder
    scope: Literal["article", "paragraph"] = "article"  # pair answers within an article or a paragraph
    seed: AtLeast0 = 1234  # which side the correct answer goes, which negatives a cap keeps
    max_oov: AtLeast0 = 0  # unknown words allowed in a question or answer
    min_answer_tokens: AtLeast1 = 5  # shortest answer kept
    max_negatives_per_question: AtLeast1 | None = None  # cap on pairs per question; none: no cap
    lowercase: bool = True  # lowercase tokens
    tokenizer: Literal["spacy", "treebank"] = (
        "spacy"  # treebank: NLTK's, as the authors (pip install 'mtl[paper]')
    )
    rules: Literal["mtl", "original"] = "mtl"  # original: the authors' selection and pairing (README)
    overwrite: bool = False  # replace an existing build at out= (never a folder that is not one)
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # auto: online with an API key, else offline
    )
    wandb_project: str = "mtl"  # W&B project
    wandb_dir: str = "runs"  # where W&B runs land


# ---- filters: pure functions over tokens -------------------------------------------------


def count_oov(tokens: Sequence[str], vocabulary: Set[str]) -> int:
    return len(tokens) - sum(map(vocabulary.__contains__, tokens))


def pick_answer(
    answers: Sequence[Sequence[str]], vocabulary: Set[str], max_oov: int, by_characters: bool = False
) -> int | None:
    """Index of the longest answer with at most `max_oov` unknown tokens (first on ties).

    Longest in tokens, or with `by_characters` in characters of the space-joined tokens
    (the authors' rule).
    """

    def size(tokens: Sequence[str]) -> int:
        return len(" ".join(tokens)) if by_characters else len(tokens)

    best = None
    for i, tokens in enumerate(answers):
        if count_oov(tokens, vocabulary) <= max_oov and (best is None or size(tokens) > size(answers[best])):
            best = i
    return best


def padded(tokens: Sequence[str]) -> str:
    """The tokens space-joined between spaces: one inside another's is a run of whole tokens."""
    return f" {' '.join(tokens)} "


def joined(tokens: Sequence[str]) -> str:
    """The tokens space-joined, as the authors compared answers."""
    return " ".join(tokens)


OVERLAP_KEYS = {"mtl": padded, "original": joined}  # rules= -> what the containment test compares


def either_inside(a: str, b: str) -> bool:
    return a in b or b in a


def contains(a: Sequence[str], b: Sequence[str]) -> bool:
    """True when either token sequence occurs contiguously inside the other."""
    return either_inside(padded(a), padded(b))


def contains_text(a: Sequence[str], b: Sequence[str]) -> bool:
    """The authors' test: either space-joined string inside the other ("cat" is in "concatenate")."""
    return either_inside(joined(a), joined(b))


def negative_candidates(index: int, keys: Sequence[str]) -> tuple[list[int], int]:
    """The scope's distinct answers usable as wrong answers for answer `index`, and how many
    overlapped it. `keys`: each answer's string for the containment test (OVERLAP_KEYS), made
    once per scope rather than once per pair."""
    mine = keys[index]
    kept, overlapping = [], 0
    for other_index, other in enumerate(keys):
        if other_index == index:
            continue
        if mine in other or other in mine:
            overlapping += 1
        else:
            kept.append(other_index)
    return kept, overlapping


# ---- one split ---------------------------------------------------------------------------


@dataclass
class Candidate:
    """A question that passed the vocabulary and length filters, with its chosen answer."""

    scope: tuple[int, ...]
    title: str
    question_id: str
    question: str
    answer: str
    question_tokens: tuple[str, ...]
    answer_tokens: tuple[str, ...]


@dataclass
class SplitResult:
    columns: dict[str, list]
    stats: dict[str, object] = field(default_factory=dict)


def select_questions(
    articles: Sequence[Article],
    tokens_of: Mapping[str, Sequence[str]],
    vocabulary: Set[str],
    config: BuildConfig,
    dropped: Counter,
) -> list[Candidate]:
    """Apply the question and answer filters; count each drop under its reason."""
    entries = [
        ((a,) if config.scope == "article" else (a, p), article.title, question)
        for a, article in enumerate(articles)
        for p, paragraph in enumerate(article.paragraphs)
        for question in paragraph.questions
    ]
    candidates = []
    for scope, title, question in entries:
        tokens = tokens_of[question.text]
        if count_oov(tokens, vocabulary) > config.max_oov:
            dropped["question_oov"] += 1
            continue
        answers = [tokens_of[answer] for answer in question.answers]
        best = pick_answer(answers, vocabulary, config.max_oov, by_characters=config.rules == "original")
        if best is None:
            dropped["answer_oov"] += 1
        elif len(answers[best]) < config.min_answer_tokens:
            dropped["answer_too_short"] += 1
        else:
            candidates.append(
                Candidate(
                    scope,
                    title,
                    question.id,
                    question.text.strip(),
                    question.answers[best].strip(),
                    tuple(tokens),
                    tuple(answers[best]),
                )
            )
    return candidates


def pair_within_scopes(
    candidates: Sequence[Candidate], config: BuildConfig, rng: np.random.Generator, dropped: Counter
) -> tuple[dict[str, list], Counter]:
    """Pair each question's answer with the other answers of its scope, correct side at random."""
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    skipped: Counter = Counter()
    by_scope: dict[tuple[int, ...], list[Candidate]] = {}
    for candidate in candidates:
        by_scope.setdefault(candidate.scope, []).append(candidate)

    for members in by_scope.values():
        questions = unique_questions(members, config.rules, dropped)
        pool: dict[tuple[str, ...], int] = {}  # the scope's distinct answers, in order
        texts: list[str] = []
        for candidate in questions.values():
            if candidate.answer_tokens not in pool:
                pool[candidate.answer_tokens] = len(texts)
                texts.append(candidate.answer)
        keys = [OVERLAP_KEYS[config.rules](tokens) for tokens in pool]
        sharing = Counter(candidate.answer_tokens for candidate in questions.values())

        for candidate in questions.values():
            negatives, overlapping = negative_candidates(pool[candidate.answer_tokens], keys)
            skipped["substring"] += overlapping
            skipped["equal_answer"] += sharing[candidate.answer_tokens] - 1
            cap = config.max_negatives_per_question
            if cap is not None and len(negatives) > cap:
                skipped["over_cap"] += len(negatives) - cap
                negatives = sorted(rng.choice(negatives, size=cap, replace=False).tolist())
            if not negatives:
                dropped["no_negatives"] += 1
                continue
            correct_first = rng.integers(0, 2, size=len(negatives)).tolist()
            wrong = [texts[index] for index in negatives]
            right = candidate.answer
            columns["question"] += [candidate.question] * len(negatives)
            columns["answer1"] += [
                right if first else other for first, other in zip(correct_first, wrong, strict=True)
            ]
            columns["answer2"] += [
                other if first else right for first, other in zip(correct_first, wrong, strict=True)
            ]
            columns["label"] += correct_first
            columns["title"] += [candidate.title] * len(negatives)
            columns["question_id"] += [candidate.question_id] * len(negatives)
    return columns, +skipped


def unique_questions(members: Sequence[Candidate], rules: str, dropped: Counter) -> dict[tuple, Candidate]:
    """A scope's questions without repeats, in file order.

    `mtl` drops a repeated question; `original` (the authors' code) also drops a question whose
    chosen answer is already the answer of a kept one, instead of keeping it unpaired with it.
    """
    questions: dict[tuple[str, ...], Candidate] = {}
    answers: set[tuple[str, ...]] = set()
    for candidate in members:
        if candidate.question_tokens in questions:
            dropped["duplicate_question"] += 1
        elif rules == "original" and candidate.answer_tokens in answers:
            dropped["duplicate_answer"] += 1
        else:
            questions[candidate.question_tokens] = candidate
            answers.add(candidate.answer_tokens)
    return questions


def build_split(
    articles: Sequence[Article],
    tokens_of: Mapping[str, Sequence[str]],
    vocabulary: Set[str],
    config: BuildConfig,
    rng: np.random.Generator,
) -> SplitResult:
    dropped: Counter = Counter({reason: 0 for reason in DROP_REASONS})
    candidates = select_questions(articles, tokens_of, vocabulary, config, dropped)
    columns, skipped = pair_within_scopes(candidates, config, rng, dropped)
    labels = columns["label"]
    stats = {
        "articles": len(articles),
        "questions": sum(len(p.questions) for a in articles for p in a.paragraphs),
        "examples": len(labels),
        "unique_questions": len(set(columns["question_id"])),
        "label_answer1_fraction": round(sum(labels) / len(labels), 6) if labels else None,
        "dropped_questions": dict(dropped),
        "skipped_pairs": {
            reason: skipped.get(reason, 0) for reason in ("equal_answer", "substring", "over_cap")
        },
    }
    return SplitResult(columns, stats)


# ---- the whole build ---------------------------------------------------------------------


def build(config: BuildConfig) -> dict[str, object]:
    """Build both splits, write `config.out` atomically, log the build to W&B, return stats."""
    out = check_output_dir(Path(config.out), "out")
    with FolderLock(out, "ClassifSQuAD output", "out"):  # a second build of `out` waits its turn: refused
        started = time.perf_counter()
        squad_source = resolve_squad_source(config.squad)
        vectors_path = resolve_vectors_path(config.vectors)
        if not config.overwrite and (built := already_built(out, config, squad_source, vectors_path)):
            return built
        check_replaceable(out, config.overwrite)
        tracker = _start_tracking(config, out, squad_source, vectors_path)
        try:
            with without_cycle_collection():
                return _build(config, out, squad_source, vectors_path, tracker, started)
        except BaseException:
            tracker.finish(exit_code=1)
            raise


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused: a build makes millions of lists, tuples and records and
    frees none of them in cycles, and the collector's passes over them took a third of the time
    of selecting and pairing questions. Reference counting still frees everything."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def tokenizing_processes() -> int:
    """Worker processes for tokenizing SQuAD: the CPUs this process may use, up to 8 (the same
    tokens with any number)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(usable, 8))


def _build(
    config: BuildConfig, out: Path, squad_source: str, vectors_path: Path, tracker: Tracker, started: float
) -> dict[str, object]:
    stages = tqdm(
        total=5, desc="build ClassifSQuAD", unit=" stages", file=progress_stream(), dynamic_ncols=True
    )
    stages.set_postfix_str("read SQuAD")
    squad = load_squad(squad_source)
    tracker.log({"build/seconds": time.perf_counter() - started, "build/stage": 1}, step=1)
    tokenizer = make_tokenizer(config.tokenizer, config.lowercase)
    stages.reset(total=3 + len(squad))  # read, tokenize, vectors, each split, write
    stages.update(1)
    stages.set_postfix_str("tokenize")

    texts = [text for articles in squad.values() for text in squad_texts(articles)]
    tokens = cached_tokenize(tokenizer, texts, processes=tokenizing_processes())  # (a rebuild reads them)
    tokens_of = dict(zip(texts, tokens, strict=True))
    words = {token for tokens in tokens_of.values() for token in tokens}
    stages.update(1)
    stages.set_postfix_str("vectors")
    vectors = load_vectors(vectors_path, words)
    vocabulary = frozenset(vectors.words)
    tracker.config_update(
        {"inputs": {"squad": squad_source, "vectors": str(vectors_path), "vectors_sha256": vectors.digest()}}
    )
    tracker.log({"build/seconds": time.perf_counter() - started, "build/stage": 2}, step=2)
    Coverage.of(
        tokens_of.values(), vocabulary.__contains__, "SQuAD's questions and answers", vectors_path.name
    ).report()
    splits, stats = {}, {}
    for index, (split, articles) in enumerate(squad.items()):
        stages.update(1)
        stages.set_postfix_str(f"{split} split")
        rng = np.random.default_rng([config.seed, index])
        result = build_split(articles, tokens_of, vocabulary, config, rng)
        if not result.stats["examples"]:
            raise UserError(
                f"the filters left the {split} split empty ({result.stats['dropped_questions']}): "
                "loosen max_oov or min_answer_tokens, or check the vectors file"
            )
        splits[split], stats[split] = result.columns, result.stats
        tracker.log(
            {
                "build/seconds": time.perf_counter() - started,
                "build/stage": 3 + index,
                f"{split}/examples": result.stats["examples"],
            },
            step=3 + index,
        )

    summary = {
        "config": recorded_settings(config),
        "vectors": {"file": vectors_path.name, "vocabulary_in_squad": len(vocabulary)},
        **({"input_sha256": digests} if (digests := input_digests(squad_source, vectors_path)) else {}),
        **tokenizer.description,
        "splits": stats,
    }
    stages.update(1)
    stages.set_postfix_str("write")
    write_dataset(out, splits, summary)
    stages.close()
    seconds = time.perf_counter() - started
    _finish_tracking(tracker, config, out, splits, summary, seconds)
    return {**summary, "seconds": round(seconds, 2), "out": str(out)}


def squad_texts(articles: Sequence[Article]) -> list[str]:
    """Every question and answer text, in file order."""
    return [
        text
        for article in articles
        for paragraph in article.paragraphs
        for question in paragraph.questions
        for text in (question.text, *question.answers)
    ]


def recorded_settings(config: BuildConfig) -> dict:
    """The settings a build records in stats.json: what decides its content."""
    return {k: v for k, v in asdict(config).items() if not k.startswith(("wandb", "overwrite", "out"))}


def input_digests(squad_source: str, vectors_path: Path) -> dict[str, str] | None:
    """SHA-256 of each input file by name (remembered per file in the cache, as the vectors'
    digest is); None for SQuAD from the Hub, which has no file here to hash."""
    folder = Path(squad_source).expanduser()
    if not folder.is_dir():
        return None
    files = [folder / name for name, _ in SQUAD_SPLITS.values()] + [vectors_path]
    return {path.name: content_digest(path) for path in files}


def already_built(out: Path, config: BuildConfig, squad_source: str, vectors_path: Path) -> dict | None:
    """The summary of the build `out` holds when it was made with these settings from these very
    files (a repeated command has nothing to do), else None. Builds that recorded no input digests
    (from the Hub, or older than this check) are never taken as the same."""
    if not is_build(out):
        return None
    try:
        recorded = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    current = json.loads(jsonfile.dumps(recorded_settings(config)))  # as JSON holds it
    digests = recorded.get("input_sha256") if isinstance(recorded, dict) else None
    if (
        not digests
        or recorded.get("config") != current
        or digests != input_digests(squad_source, vectors_path)
    ):
        return None
    return {**recorded, "seconds": 0.0, "out": str(out), "unchanged": True}


def check_replaceable(out: Path, overwrite: bool) -> None:
    """`out` may be written when it does not exist, is empty, or is a build and `overwrite` is set."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not is_build(out):
        raise UserError(
            f"output folder {out} exists and is not a ClassifSQuAD build ({describe_folder(out)}): "
            "choose another out= (overwrite=true only replaces an earlier build)"
        )
    if not overwrite:
        raise UserError(
            f"output folder {out} already holds a build: pass overwrite=true or choose another out="
        )


def write_dataset(out: Path, splits: dict[str, dict[str, list]], summary: dict) -> None:
    """Write into a hidden sibling folder, sync it, then swap it in, so `out` is never half-written."""
    remove_abandoned(out)

    def fill(partial: Path) -> None:
        data = to_dataset_dict(splits)
        data.save_to_disk(str(partial))
        (partial / "stats.json").write_text(jsonfile.dumps(summary, indent=2, sort_keys=True) + "\n")
        # each split's size in bytes, as datasets records it: without it the card's splits are
        # "malformed" to datasets.load_dataset, which says so at every load
        sizes = {split: int(data[split].data.nbytes) for split in data}
        (partial / "README.md").write_text(dataset_card({**summary, "split_bytes": sizes}))

    write_folder(out, fill, "ClassifSQuAD to")


def remove_abandoned(out: Path) -> None:
    """Hidden folders that an interrupted build of `out` left behind (their process is gone)."""
    for leftover in out.parent.glob(f".{out.name}.*-*"):
        kind, _, pid = leftover.name.removeprefix(f".{out.name}.").partition("-")
        if kind in ("partial", "old") and pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    # our own pid: a leftover of an earlier process that had it
    return pid != os.getpid() and process_alive(pid)


def card_metadata(summary: dict) -> str:
    """The card's YAML, as huggingface_hub's DatasetCardData writes it: license, language, task,
    size, the features and splits, and where each split's Arrow files are (so the Hub and
    `datasets.load_dataset` read the folder as it is)."""
    from huggingface_hub import DatasetCardData

    splits = summary["splits"]
    total = sum(stats["examples"] for stats in splits.values())
    sizes = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]
    features = [
        {"name": name, "dtype": {"class_label": {"names": {str(i): n for i, n in enumerate(LABEL_NAMES)}}}}
        if name == "label"
        else {"name": name, "dtype": "string"}
        for name in COLUMNS
    ]
    data = DatasetCardData(
        pretty_name="ClassifSQuAD",
        license="cc-by-sa-4.0",
        language=["en"],
        task_categories=["text-classification"],
        source_datasets=["extended|rajpurkar/squad"],
        size_categories=next((label for limit, label in sizes if total < limit), "1M<n<10M"),
        dataset_info={
            "features": features,
            "splits": [
                {
                    "name": split,
                    "num_bytes": summary.get("split_bytes", {}).get(split, 0),
                    "num_examples": stats["examples"],
                }
                for split, stats in splits.items()
            ],
        },
        configs=[
            {
                "config_name": "default",
                "data_files": [{"split": split, "path": f"{split}/*.arrow"} for split in splits],
            }
        ],
    )
    return data.to_yaml()


def dataset_card(summary: dict) -> str:
    config, splits = summary["config"], summary["splits"]
    rows = [
        ("examples", "examples"),
        ("unique questions", "unique_questions"),
        ("label 1 (answer1 correct) fraction", "label_answer1_fraction"),
        ("SQuAD questions", "questions"),
        *((f"dropped: {reason.replace('_', ' ')}", ("dropped_questions", reason)) for reason in DROP_REASONS),
        *(
            (f"pairs skipped: {reason.replace('_', ' ')}", ("skipped_pairs", reason))
            for reason in ("equal_answer", "substring", "over_cap")
        ),
    ]

    def cell(stats: dict, key: str | tuple[str, str]) -> object:
        return stats[key[0]][key[1]] if isinstance(key, tuple) else stats[key]

    table = [f"| | {' | '.join(splits)} |", f"|---|{'---|' * len(splits)}"]
    table += [
        f"| {label} | {' | '.join(str(cell(s, key)) for s in splits.values())} |" for label, key in rows
    ]
    return "\n".join(
        [
            "---",
            card_metadata(summary),
            "---",
            "",
            "# ClassifSQuAD",
            "",
            "Triples (question, answer1, answer2) derived from SQuAD v1.1 following Liu et al. (2018),",
            "*Task-universal sentence embeddings from learning natural language inference*, Section 2.",
            "`label` is 1 when answer1 is the correct answer to the question, 0 when answer2 is.",
            "Wrong answers are answers to other questions of the same "
            f"{config['scope']}; pairs where one answer contains the other are skipped.",
            "",
            f"- vectors: `{summary['vectors']['file']}` ({summary['vectors']['vocabulary_in_squad']} SQuAD words in vocabulary)",
            f"- the filters read tokens of {summary['tokenizer']}"
            + (", lowercased" if summary["lowercase"] else "")
            + "; the columns hold SQuAD's own text (cased, untokenized)",
            f"- max_oov={config['max_oov']}, min_answer_tokens={config['min_answer_tokens']}, "
            f"max_negatives_per_question={config['max_negatives_per_question']}, seed={config['seed']}",
            "",
            *table,
            "",
            f"Built from SQuAD v1.1 and the vectors file above with `{build_command(config)}`.",
            "",
            "Source: SQuAD v1.1 (Rajpurkar et al., 2016), CC BY-SA 4.0; this derivative is under the same license.",
            "",
        ]
    )


def _start_tracking(config: BuildConfig, out: Path, squad_source: str, vectors_path: Path) -> Tracker:
    """The build's W&B run, started before the work so its runtime is the build's."""
    return Tracker.start(
        job_type="build-dataset",
        config={**asdict(config), "inputs": {"squad": squad_source, "vectors": str(vectors_path)}},
        project=config.wandb_project,
        directory=config.wandb_dir,
        mode=config.wandb,
        name=f"build-classifsquad-{out.name}",
        notes=shlex.join(["just", "build-classifsquad", *changed_keys(config)]),
        tags=["build", config.scope],
    )


def _finish_tracking(
    tracker: Tracker, config: BuildConfig, out: Path, splits: dict, summary: dict, seconds: float
) -> None:
    if not tracker.active:
        return
    flat = {
        f"{split}/{key}": value
        for split, stats in summary["splits"].items()
        for key, value in flattened(stats, "/").items()
    }
    tracker.summary({**flat, "build/seconds": seconds})
    columns = ["split", *SENTENCES, "label"]
    tracker.table("samples", columns, sample_rows(splits, config.seed), step=3 + len(splits))
    tracker.log_artifact("classifsquad", "dataset", out, metadata=summary, reference=True)
    tracker.finish()


def build_command(recorded: dict) -> str:
    """The command that makes this build again from a build's recorded config: the keys that
    differ from their defaults, but the input paths (machine-specific; the card names the files)."""
    defaults = asdict(BuildConfig())
    keys = [
        f"{key}={'none' if value is None else str(value).lower() if isinstance(value, bool) else value}"
        for key, value in recorded.items()
        if key in defaults and key not in ("squad", "vectors") and value != defaults[key]
    ]
    return " ".join(["just build-classifsquad", *keys])


def changed_keys(config: BuildConfig) -> list[str]:
    """key=value for each setting that differs from its default: the command, near enough."""
    defaults = asdict(BuildConfig())
    return [f"{key}={value}" for key, value in asdict(config).items() if value != defaults[key]]


def sample_rows(splits: dict, seed: int) -> list[list[object]]:
    """One triple each of `SAMPLE_ROWS` questions per split, drawn at random (seeded)."""
    rows = []
    for index, (split, cols) in enumerate(splits.items()):
        first_of = {}
        for row, question_id in enumerate(cols["question_id"]):
            first_of.setdefault(question_id, row)
        questions = list(first_of)
        rng = np.random.default_rng([seed, index])
        chosen = rng.choice(len(questions), size=min(SAMPLE_ROWS, len(questions)), replace=False)
        for q in sorted(chosen):
            i = first_of[questions[q]]
            rows.append([split, *(cols[name][i] for name in (*SENTENCES, "label"))])
    return rows


def config_from_args(args: Sequence[str]) -> BuildConfig:
    """`preset=NAME` (experiments/builds/) first, then every other key=value over it."""
    presets = [a.partition("=")[2] for a in args if a.startswith("preset=")]
    base = apply_overrides(
        BuildConfig(), preset_overrides(presets[-1], build_preset_dir()) if presets else []
    )
    return apply_overrides(base, [a for a in args if not a.startswith("preset=")])  # they override it


def command(args: Sequence[str]) -> None:
    """`just build-classifsquad`."""
    print(format_summary(build(config_from_args(args))))


def format_summary(summary: dict) -> str:
    lines = [
        f"{summary['out']} already holds this build (the same settings, SQuAD and vectors files): "
        "nothing to do; overwrite=true builds it again"
        if summary.get("unchanged")
        else f"ClassifSQuAD written to {summary['out']} in {summary['seconds']:.1f} s "
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
