"""`just mine-negatives`: hard negatives from an encoder's ranking, a triples file and a task file
that mnrl trains on, its provenance recorded with the run."""

import json
import re

import numpy as np
import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.eval.mine_negatives import MineConfig, mine

from .conftest import FIXTURES, start_run


def embedder(vectors: dict[str, list[float]]):
    return lambda texts: np.array([vectors[t] for t in texts], dtype=np.float32)


# Anchor "a" with positives p1 and p2; candidates at falling cosines with "a": the positives
# themselves are never negatives, and c1 is as close to "a" as its positive p2 (a false negative).
VECTORS = {
    "a": [1.0, 0.0],
    "b": [0.0, 1.0],
    "p1": [1.0, 0.05],
    "p2": [1.0, 0.5],
    "c1": [1.0, 0.45],
    "c2": [1.0, 1.0],
    "c3": [0.5, 1.0],
    "pb": [0.0, 1.0],
}
PAIRS = [("a", "p1"), ("a", "p2"), ("b", "pb"), ("x1", "c1"), ("x2", "c2"), ("x3", "c3")]
VECTORS.update({"x1": [0.0, -1.0], "x2": [0.0, -1.0], "x3": [0.0, -1.0]})


def test_negatives_come_from_the_rank_window_below_the_positive_by_the_margin():
    config = MineConfig(range_min=0, range_max=3, margin=0.05, num_negatives=1)
    triples, _ = mine(config, PAIRS, embedder(VECTORS))
    by_pair = {(a, p): n for a, p, n in triples}
    # For "a" (own positives p1, p2 left out), ranked: c1 (.91), c2 (.71), c3 (.45). Its least similar
    # positive p2 has .89: c1 is above .89 - .05, so the nearest kept is c2.
    assert by_pair[("a", "p1")] == by_pair[("a", "p2")] == "c2"
    config = MineConfig(range_min=1, range_max=3, margin=0.05, num_negatives=2)
    triples, _ = mine(config, PAIRS, embedder(VECTORS))
    # range_min=1 skips c1 (rank 0); c2 and c3 (ranks 1, 2) are both below the ceiling.
    assert [n for a, p, n in triples if (a, p) == ("a", "p1")] == ["c2", "c3"]


def test_a_missing_negative_leaves_the_anchor_out_and_random_sampling_is_seeded():
    strict = MineConfig(range_min=0, range_max=2, margin=2.0)  # no cosine is 2 below another
    triples, left_out = mine(strict, PAIRS, embedder(VECTORS))
    assert triples == [] and left_out == len(PAIRS)
    loose = MineConfig(range_min=0, range_max=6, margin=-2.0, num_negatives=2, sampling="random", seed=3)
    first, _ = mine(loose, PAIRS, embedder(VECTORS))
    assert first == mine(loose, PAIRS, embedder(VECTORS))[0]
    assert all(n not in ("p1", "p2") for a, _, n in first if a == "a") and len(first) == 2 * len(PAIRS)


def test_bad_settings_are_one_line_each(tmp_path):
    with pytest.raises(UserError, match=r"range_max=5 must exceed range_min=5"):
        MineConfig(range_min=5, range_max=5)


def test_mined_triples_train_mnrl_and_the_run_records_the_miner(tiny_data, tmp_path, capsys):
    teacher, _ = start_run(tiny_data, tmp_path / "miner", "tasks=nli", "hidden=4", "max_steps=2")
    out = tmp_path / "mined_snli.toml"
    args = [
        f"encoder={teacher}",
        f"source={FIXTURES / 'snli_tiny'}",
        "range_min=1",
        "range_max=20",
        f"out={out}",
    ]
    assert main(["mine-negatives", *args, "margin=0.0"]) == 0
    assert "triples for" in capsys.readouterr().out
    lines = (tmp_path / "mined_snli.tsv").read_text().splitlines()
    assert lines and all(len(line.split("\t")) == 3 for line in lines)
    assert main(["mine-negatives", *args]) == 2  # out= exists: refused
    run_dir, summary = start_run(
        tiny_data,
        tmp_path / "run",
        f"tasks=nli,{out}",
        f"mined_snli.source={FIXTURES / 'snli_tiny'}",
        "max_steps=4",
    )
    record = json.loads((run_dir / "config.json").read_text())
    task = record["config"]["tasks"]["mined_snli"]
    assert task["kind"] == "mnrl" and task["triples"] == str(tmp_path / "mined_snli.tsv")
    assert json.loads(task["provenance"])["encoder"] == str(teacher)
    assert "mined_snli.tsv" in record["inputs"]["mined_snli"]["source"]
    assert 0 <= summary["best/mined_snli/dev/recall_at_1"] <= 1


def test_a_damaged_triples_line_is_one_clear_error(tiny_data, tmp_path):
    (tmp_path / "bad.tsv").write_text("anchor\tpositive\n")
    (tmp_path / "bad_mined.toml").write_text(f'kind = "mnrl"\ntriples = "{tmp_path / "bad.tsv"}"\n')
    with pytest.raises(UserError, match=r"line 1 is not anchor<TAB>positive<TAB>negative \(2 fields\)"):
        start_run(tiny_data, tmp_path / "run", f"tasks=nli,{tmp_path / 'bad_mined.toml'}", "max_steps=2")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["pairs={empty}"], r"pairs=.*empty.tsv holds no anchor<TAB>positive line"),
        (
            [f"source={FIXTURES / 'snli_tiny'}", "split=nope"],
            r"split 'nope' not found .*: set split= or source=PATH",
        ),
        (["out={tmp}/nli.toml"], r"out=.*nli.toml: nli is a built-in task of mtl .*mined_nli.toml"),
    ],
)
def test_a_degenerate_input_or_a_colliding_name_is_one_line_naming_the_key(tmp_path, capsys, keys, message):
    (tmp_path / "empty.tsv").write_text("\n\n")
    given = [k.format(empty=tmp_path / "empty.tsv", tmp=tmp_path) for k in keys]
    out = [] if any(k.startswith("out=") for k in given) else [f"out={tmp_path}/mined.toml"]
    assert main(["mine-negatives", "encoder=sentence-transformers/none", *out, *given]) == 2
    assert re.search(message, capsys.readouterr().err)
