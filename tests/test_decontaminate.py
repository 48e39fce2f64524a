"""Transfer scores without the test items a run trained on: the ledger's keys, the items file's
marks, the report's second score, compare's row without the seen items, the report page."""

import json

import numpy as np
import pytest

from mtl.cli import main
from mtl.eval import contamination, decontaminate
from mtl.eval.transfer.items import FEWEST_UNSEEN, seen_marks, without
from mtl.files import schemas
from mtl.formats import run_files
from mtl.transfer_tasks.tasks import read_task

from .conftest import start_run


@pytest.fixture()
def senteval_root(shared_data):
    return shared_data / "senteval" / "downstream"


def keys_of(texts) -> list[str]:
    return sorted({contamination.sentence_key(d) for d in contamination.exact_keys(texts).tolist()})


def key_of(text: str) -> str:
    return contamination.sentence_key(contamination.exact_keys([text])[0])


def plant_ledger(run_dir, seen: dict[str, list[str]]) -> None:
    """summary.json's ledger as if the run had trained on the `seen` test sentences of each task."""
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["contamination"] = {
        "test_sets": {
            task: {"sentences": 5000, "exact": len(keys_of(texts)), "near": 0, "seen": keys_of(texts)}
            for task, texts in seen.items()
        }
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))


def test_the_ledger_lists_the_seen_test_sentences_by_key(senteval_root):
    mr = read_task("MR", senteval_root).splits["all"].sentences[0]
    long = next(s for s in mr[2:] if len(s.split()) >= 30)
    near = " ".join([*long.split()[:-1], "zzzq"])
    counts = contamination.ledger([mr[0].upper(), mr[1], near], senteval_root)["test_sets"]["MR"]
    assert counts["seen"] == keys_of([mr[0], mr[1], long])  # the near one by its test sentence's key
    schemas.checked(run_files.Ledger, {"test_sets": {"MR": counts}}, "ledger", "")
    with pytest.raises(schemas.DamagedFile, match="3 keys for 4 seen sentences"):
        schemas.checked(run_files.Ledger, {"test_sets": {"MR": {**counts, "near": 2}}}, "ledger", "")


def test_test_sentences_that_normalise_alike_repeat_a_key():
    """SNLI's test set holds sentences differing only in case or punctuation: one key, seen twice
    (the cpu-small-nli ledger: 276 seen sentences, 252 distinct keys)."""
    a, b = contamination.exact_keys(["A dog runs.", "a dog runs"])
    assert a == b
    entry = {"sentences": 2, "exact": 2, "near": 0, "seen": [contamination.sentence_key(a)] * 2}
    assert schemas.checked(run_files.Ledger, {"test_sets": {"SNLI": entry}}, "ledger", "")["test_sets"][
        "SNLI"
    ]


def test_an_item_is_seen_when_one_of_its_sentences_is(senteval_root):
    sick = read_task("SICK-R", senteval_root)
    test = sick.splits["test"]
    first, second = test.sentences
    marks = decontaminate.item_marks(sick, frozenset(keys_of([first[0], second[5]])))["seen"]
    expected = np.array(
        [a in (first[0], second[5]) or b in (first[0], second[5]) for a, b in zip(first, second, strict=True)]
    )
    assert marks.dtype == bool and np.array_equal(marks, expected) and 2 <= marks.sum() < len(marks)
    sts = read_task("STS16", senteval_root)
    subset, split = next(iter(sts.splits.items()))
    marked = decontaminate.item_marks(sts, frozenset(keys_of([split.sentences[0][3]])))
    assert set(marked) == {f"{name}/seen" for name in sts.splits} and marked[f"{subset}/seen"][3]


def test_unseen_items_keep_every_array_aligned_and_refuse_a_handful():
    items = {"predicted": np.arange(40) % 2, "gold": np.zeros(40, dtype=int), "log_probs": np.zeros((40, 2))}
    items["seen"] = np.arange(40) < 20
    kept = without(items, seen_marks(items))
    assert len(kept["gold"]) == 20 and kept["log_probs"].shape == (20, 2)
    items["seen"] = np.arange(40) < 40 - FEWEST_UNSEEN + 1
    assert without(items, seen_marks(items)) is None
    assert seen_marks({"predicted": np.zeros(3), "gold": np.zeros(3)}) is None
    sts = {}  # an STS task: a subset left with too few unseen items is left out, the others scored
    for subset, seen in (("images", np.arange(30) < 25), ("forum", np.arange(30) < 5)):
        sts |= {
            f"{subset}/predicted": np.arange(30.0),
            f"{subset}/gold": np.arange(30.0),
            f"{subset}/seen": seen,
        }
    assert set(without(sts, seen_marks(sts))) == {"forum/predicted", "forum/gold", "forum/seen"}
    entry = decontaminate.summary(sts)
    assert entry["subsets_left_out"] == ["images"] and entry["seen"] == 30 and entry["unseen_score"] == 100.0
    from mtl.formats.transfer_report import decontaminated_lines

    said = decontaminated_lines({"decontaminated": {"STS14": entry}})[1]
    assert "STS14 100.00 (without images: too few unseen)" in said  # the score says what it leaves out


def test_a_planted_leak_is_scored_without_its_items_in_report_compare_and_page(
    tiny_data, tmp_path, senteval_root
):
    cr = read_task("CR", senteval_root).splits["all"]
    leaked = [s for i, s in enumerate(cr.sentences[0]) if i % 2 == 0]  # half of CR's sentences
    # ... and every item whose sentence normalises to one of them (CR repeats some sentences)
    leaked_keys = set(keys_of(leaked))  # once: rebuilt for each of CR's 3,775 sentences it was 40 s of CI
    marked = sum(key in leaked_keys for key in map(key_of, cr.sentences[0]))
    runs = []
    for name, extra in (("leak", "hidden=8"), ("clean", "hidden=12")):
        run_dir, _ = start_run(tiny_data, tmp_path / name, "max_steps=2", extra)
        plant_ledger(run_dir, {"CR": leaked if name == "leak" else [], "MR": []})
        data = f"data={senteval_root}"
        assert (
            main(["transfer", f"run={run_dir}", "tasks=CR,STS16", "mode=fast", "wandb=disabled", data]) == 0
        )
        runs.append(run_dir)
    report = json.loads((runs[0] / "transfer-fast.json").read_text())
    entry = report["decontaminated"]["CR"]
    assert entry["items"] == len(cr.labels) and entry["seen"] == marked > len(cr.labels) // 2
    assert entry["unseen_score"] is not None and "STS16" not in report["decontaminated"]  # no ledger entry
    assert (
        "Without the test items holding a sentence the run trained on"
        in (runs[0] / "transfer-fast.md").read_text()
    )
    with np.load(runs[0] / "transfer-fast.items.npz") as items:
        assert items["CR/seen"].sum() == entry["seen"] and "STS16/MSRpar/seen" not in items.files
    clean = json.loads((runs[1] / "transfer-fast.json").read_text())["decontaminated"]["CR"]
    assert clean["seen"] == 0 and clean["unseen_score"] == clean["score"]

    out = tmp_path / "compare.md"
    assert main(["compare", *map(str, runs), "report=transfer-fast", f"out={out}", "wandb=disabled"]) == 0
    text = out.read_text()
    assert "| CR unseen |" in text and "| STS16 unseen |" not in text
    assert f"CR unseen: its {len(cr.labels) - marked:,} of {len(cr.labels):,} test items" in text
    record = json.loads(out.with_suffix(".json").read_text())
    assert {c["task"] for c in record["comparisons"]} == {"CR", "CR unseen", "CR seen", "STS16"}
    assert "| CR seen |" in text and f"CR seen: its {marked:,} test items" in text

    page = tmp_path / "page.html"
    assert main(["report", *map(str, runs), f"out={page}"]) == 0
    shown = page.read_text(encoding="utf-8")
    assert f"(unseen\u00a0{entry['unseen_score']:.2f})" in shown
    for task in ("CR", "CR unseen"):  # the page's intervals are compare's: one pair, one interval
        row = next(line for line in text.splitlines() if line.startswith(f"| {task} |"))
        assert f"<td>{task}</td>" in shown and f"<td>{row.split('|')[7].strip()}</td>" in shown


def test_a_ledger_without_keys_leaves_the_second_score_out_and_says_why(
    tiny_data, tmp_path, senteval_root, capsys
):
    run_dir, _ = start_run(tiny_data, tmp_path / "old", "max_steps=2")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["contamination"] = {"test_sets": {"CR": {"sentences": 10, "exact": 1, "near": 0}}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    data = f"data={senteval_root}"
    assert main(["transfer", f"run={run_dir}", "tasks=STS16", "mode=fast", "wandb=disabled", data]) == 0
    assert "does not list them (trained before 2026-11-29)" in capsys.readouterr().err
    assert json.loads((run_dir / "transfer-fast.json").read_text()).get("decontaminated") is None


def test_a_merged_encoder_carries_its_parents_ledgers(tiny_data, tmp_path, senteval_root):
    parents = []
    for name in ("a", "b"):
        run_dir, _ = start_run(tiny_data, tmp_path / name, "max_steps=2", "tasks=nli")
        parents.append(run_dir)
    cr = read_task("CR", senteval_root).splits["all"].sentences[0]
    plant_ledger(parents[0], {"CR": cr[:3]})
    plant_ledger(parents[1], {"CR": cr[3:5]})
    assert main(["merge-encoders", *(f"run={p}" for p in parents), f"out={tmp_path / 'merged'}"]) == 0
    seen, why = decontaminate.runs_seen([str(tmp_path / "merged")])
    assert why == "" and seen["CR"] == frozenset(keys_of(cr[:5]))
    # a parent replaced since (another run at its path): the merge's ledger is not that run's
    (weights,) = parents[1].glob("*.safetensors")
    other, _ = start_run(tiny_data, tmp_path / "other", "max_steps=3", "tasks=nli")
    weights.write_bytes(next(other.glob("*.safetensors")).read_bytes())
    seen, why = decontaminate.runs_seen([str(tmp_path / "merged")])
    assert seen is None and "has changed since the merge" in why


def test_just_ledger_lists_an_old_runs_seen_sentences_and_keeps_the_rest(
    tiny_data, tmp_path, senteval_root, capsys
):
    run_dir, before = start_run(tiny_data, tmp_path / "run", "max_steps=2")  # contamination=false
    assert before["contamination"] == {"skipped": "contamination=false"}
    assert main(["ledger", f"run={run_dir}", f"data={senteval_root}"]) == 0
    after = json.loads((run_dir / "summary.json").read_text())
    assert {k: v for k, v in after.items() if k != "contamination"} == {
        k: v for k, v in before.items() if k != "contamination"
    }
    assert all(isinstance(entry["seen"], list) for entry in after["contamination"]["test_sets"].values())
    assert "written to" in capsys.readouterr().out
    assert main(["ledger", f"run={tmp_path}"]) == 2
    assert "is not a run folder (no config.json): pass run=runs/<run>" in capsys.readouterr().err


def test_a_baseline_keeps_no_ledger_and_is_scored_on_the_runs_unseen_items(
    tiny_data, tmp_path, senteval_root, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the baseline's folder: runs/baseline-glove-bow
    run_dir, _ = start_run(tiny_data, tmp_path / "leak", "max_steps=2")
    plant_ledger(run_dir, {"CR": read_task("CR", senteval_root).splits["all"].sentences[0][:300]})
    common = ["tasks=CR", "mode=fast", "wandb=disabled", f"data={senteval_root}"]
    assert main(["transfer", f"run={run_dir}", *common]) == 0
    assert main(["transfer", "baseline=glove-bow", f"vectors={tiny_data['vectors']}", *common]) == 0
    out = tmp_path / "compare.md"
    baseline = tmp_path / "runs" / "baseline-glove-bow"
    assert (
        main(["compare", str(run_dir), str(baseline), "report=transfer-fast", f"out={out}", "wandb=disabled"])
        == 0
    )
    assert "| CR unseen |" in out.read_text()


def test_a_merge_naming_itself_a_parent_is_no_ledger_not_a_loop(tmp_path):
    folder = tmp_path / "merged"
    folder.mkdir()
    record = {
        "merged": {
            "method": "average",
            "parents": [{"path": str(folder / "encoder.json"), "sha256": "0" * 64}],
        }
    }
    (folder / "encoder.json").write_text(json.dumps(record))
    seen, why = decontaminate.runs_seen([str(folder)])
    assert seen is None and "names itself among its parents" in why
