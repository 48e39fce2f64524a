"""Encoders combined by concatenation (transfer run=a,b) and nearest-neighbour search."""

import json

import numpy as np
import pytest
import torch

from mtl import load_encoder
from mtl.analysis.decompose import wilson_interval
from mtl.analysis.neighbours import nearest
from mtl.cli import main
from mtl.errors import UserError
from mtl.eval.combined import CombinedEncoder
from mtl.eval.transfer.suite import TransferConfig, output_folder
from mtl.runs import wandb_group
from mtl.tracking.wandb_file import by_kind, run_files

from .conftest import FIXTURES, start_run

SENTENCES = ["A man is playing a guitar .", "Two dogs run through the snow ."]


def test_combined_runs_concatenate_their_embeddings_and_transfer(tiny_data, senteval, tmp_path, capsys):
    a, _ = start_run(tiny_data, tmp_path / "a", "hidden=4")
    b, _ = start_run(tiny_data, tmp_path / "b", "encoder=gru", "hidden=6", "pooling=last")
    combined = CombinedEncoder([load_encoder(a, device="cpu"), load_encoder(b, device="cpu")])
    assert combined.name == "a+b" and combined.dim == 8 + 6
    np.testing.assert_allclose(
        combined.encode(SENTENCES),
        np.concatenate([load_encoder(a).encode(SENTENCES), load_encoder(b).encode(SENTENCES)], axis=1),
        rtol=1e-5,
        atol=1e-6,
    )
    # With no out=: beside the runs it combines, whatever the current directory.
    assert output_folder(TransferConfig(run=f"{a},{b}")) == tmp_path.absolute() / "combined-a+b"
    out = tmp_path / "both"
    args = ["transfer", f"run={a},{b}", "mode=fast", "tasks=MR", f"data={senteval}", f"out={out}"]
    assert main([*args, f"vectors={tiny_data['vectors']}", "wandb=disabled"]) == 0
    report = json.loads((out / "transfer-fast.json").read_text())
    assert report["encoder"] == "a+b" and report["dim"] == 14 and "MR" in report["results"]
    assert "| a+b | 14 |" in capsys.readouterr().out


def test_nearest_neighbours_rank_by_cosine():
    pool = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    indices, cosines = nearest(np.array([[2.0, 0.1], [0.0, -3.0]]), pool, k=4)
    assert indices[0].tolist() == [0, 2, 1, 3] and cosines[0][0] > cosines[0][1] > cosines[0][2]
    assert indices[1][-1] == 1 and np.isclose(cosines[1][-1], -1.0)  # the opposite direction, last


def test_neighbours_finds_a_sentence_of_the_pool_itself(tiny_data, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    pool = [line.strip() for line in (FIXTURES / "snli_tiny" / "s2.train").read_text().splitlines()]
    query = pool[7]
    args = [
        "neighbours",
        f"run={run_dir}",
        f"query={query}|{pool[11]}",
        f"pool={FIXTURES / 'snli_tiny' / 's2.train'}",
    ]
    assert main([*args, "k=2", "device=cpu", "wandb=offline"]) == 0
    (run_file,) = run_files(run_dir / "transfer")
    assert any(a["type"] == "run_table" and "neighbours" in a["name"] for a in by_kind(run_file)["artifact"])
    out = capsys.readouterr().out
    blocks = out.split("query: ")
    assert (
        blocks[1].splitlines()[1] == f"  1.000  {query}"
        and blocks[2].splitlines()[1] == f"  1.000  {pool[11]}"
    )
    assert main(["neighbours", f"run={run_dir}"]) == 2
    assert 'needs run=runs/<run> and query="a sentence"' in capsys.readouterr().err


def test_breakdown_bins_items_and_counts_their_accuracy():
    from mtl.analysis.decompose import LENGTH_BINS, OOV_BINS, breakdown

    correct = np.array([True, False, True, True, False, True])
    lengths = np.array([3, 10, 11, 25, 40, 31])
    assert breakdown(correct, lengths, LENGTH_BINS) == [
        ("0-10", 2, 50.0),
        ("11-20", 1, 100.0),
        ("21-30", 1, 100.0),
        ("31+", 2, 50.0),
    ]
    oov = np.array([0.0, 0.0, 0.05, 0.1, 0.5, 0.2])
    assert [(label, n) for label, n, _ in breakdown(correct, oov, OOV_BINS)] == [
        ("0%", 2),
        ("0-5%", 1),
        ("5-15%", 1),
        ("15-100%", 2),
    ]


def test_decompose_reads_a_transfer_report_and_its_task(tiny_data, senteval, tmp_path, capsys, monkeypatch):
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    args = ["transfer", f"run={run_dir}", "mode=fast", "tasks=MR,CR", f"data={senteval}", "wandb=disabled"]
    assert main([*args, f"vectors={tiny_data['vectors']}"]) == 0
    capsys.readouterr()
    assert (
        main(["decompose", f"run={run_dir}", "report=transfer-fast", f"data={senteval}", "wandb=offline"])
        == 0
    )
    out = capsys.readouterr().out
    assert "### MR" in out and "### CR" in out and "tiny.8d.txt" in out
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| length |")]
    items = [int(row[3].rsplit("(", 1)[1].split(")")[0].replace(",", "")) for row in rows[:4]]
    assert sum(items) == 60  # every MR item in one length bin
    report = json.loads((run_dir / "transfer-fast.json").read_text())
    accuracy = 100 * report["results"]["MR"]["acc"]
    low, high = wilson_interval(accuracy, 60)  # (SciPy's Wilson interval, checked in test_report)
    assert f"| all | all | {accuracy:.2f} [{low:.1f}, {high:.1f}] (60) |" in out
    assert "| label | negative |" in out and "| label | positive |" in out  # MR's classes by name
    (run_file,) = run_files(run_dir / "transfer")  # the tables as a W&B run beside the transfer runs
    records = by_kind(run_file)
    assert records["run"][0]["job_type"] == "decompose"
    assert records["run"][0]["run_group"] == wandb_group(run_dir) == "multitask"  # the training run's group
    assert any(a["type"] == "run_table" and "decomposition" in a["name"] for a in records["artifact"])
    # A one-run report page holds the same decomposition, the transfer data found as transfer finds it.
    (tmp_path / "data" / "senteval").mkdir(parents=True)
    (tmp_path / "data" / "senteval" / "downstream").symlink_to(senteval)
    monkeypatch.setenv("MTL_DATA_DIR", str(tmp_path / "data"))
    assert main(["report", str(run_dir), f"out={tmp_path / 'page.html'}"]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "Where the accuracy comes from (just decompose)" in page and "<th>MR</th><th>CR</th>" in page
    table = page.split("Where the accuracy comes from")[1]
    assert table.index("<td>positive</td>") < table.index("<td>all</td><td>all</td>")  # the whole set last


def test_max_pooling_wins_are_counted_per_position():
    from mtl.analysis.maxpool import by_bucket, by_word, wins

    states = [np.array([[1.0, 0.0, 5.0, 2.0], [0.0, 3.0, 1.0, 1.0]]), np.array([[1.0, 1.0, 1.0, 1.0]])]
    shares = wins(states)
    assert shares[0].tolist() == [0.75, 0.25] and shares[1].tolist() == [1.0]
    tokens = [["the", "guitar"], ["the"]]
    ranks = {"the": 0, "guitar": 5000}
    rows = by_bucket(tokens, shares, ranks.get)
    assert rows[0] == ("rank 0-100", 2, (0.75 * 2 + 1.0) / 2) and rows[2] == ("rank 1,000-10,000", 1, 0.5)
    assert by_word(tokens, shares, min_count=2) == {"the": (2, 1.25)}


def test_maxpool_compares_a_trained_encoder_with_its_untrained_twin(tiny_data, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "pooling=max")
    pool = FIXTURES / "snli_tiny" / "s1.train"
    assert main(["maxpool", f"run={run_dir}", f"pool={pool}", "min_count=3", "wandb=offline"]) == 0
    out = capsys.readouterr().out
    assert (
        "| rank 0-100 |" in out and "trained: most picked words" in out and "untrained: least picked" in out
    )
    from mtl.analysis.maxpool import _untrained

    trained = load_encoder(run_dir, device="cpu")
    twin = _untrained(trained, seed=1).encoder
    assert torch.equal(twin.embedding.weight, trained.encoder.embedding.weight)  # the same word vectors
    assert not torch.equal(twin.lstm.weight_hh_l0, trained.encoder.lstm.weight_hh_l0)  # the rest drawn anew
    (run_file,) = run_files(run_dir / "transfer")
    assert by_kind(run_file)["run"][0]["run_group"] == wandb_group(run_dir) == "multitask"
    tables = {a["name"] for a in by_kind(run_file)["artifact"] if a["type"] == "run_table"}
    assert any("by_frequency" in name for name in tables) and any("by_word" in name for name in tables)
    page = (run_dir / "maxpool.html").read_text()
    assert page.count('<img src="data:image/svg+xml;base64,') == 2  # by frequency rank, example sentences
    assert "<pre" not in page and "<td>rank 0-100</td>" in page and "| rank" not in page
    # a rank the tiny pool holds no word of has no share: a dash, not "nan", on the page and the console
    assert "<td>rank 100,000+</td><td>0</td><td>–</td><td>–</td>" in page and "nan" not in page
    assert "| rank 100,000+ | 0 | – | – |" in out
    assert main(["report", str(run_dir), f"out={tmp_path / 'report.html'}"]) == 0
    assert (
        f'<a href="{(run_dir / "maxpool.html").resolve().as_uri()}">run</a>'
        in (tmp_path / "report.html").read_text()
    )
    mean, _ = start_run(tiny_data, tmp_path / "mean", "pooling=mean")
    assert main(["maxpool", f"run={mean}", f"pool={pool}"]) == 2
    assert "pools with mean: just maxpool reads encoders trained with pooling=max" in capsys.readouterr().err


def test_an_analogy_ranks_the_pool_by_b_minus_a_plus_c_without_the_three(tiny_data, tmp_path, capsys):
    """query="a|b|c" with analogy=true: the pool by cos(v(b) - v(a) + v(c)), a, b and c left out;
    the ranking is checked against the encoder's own embeddings."""
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    pool_file = FIXTURES / "analogies.txt"
    pool = pool_file.read_text().splitlines()
    a, b, c = "a man is walking .", "a woman is walking .", "a man is running ."
    args = ["neighbours", f"run={run_dir}", f"query={a}|{b}|{c}", f"pool={pool_file}", "analogy=true"]
    assert main([*args, "k=3", "device=cpu", "wandb=disabled"]) == 0
    printed = capsys.readouterr().out.split("query: ")[1].splitlines()
    assert printed[0] == f"{a} : {b} :: {c} : ?"
    shown = [line.strip().split("  ", 1)[1] for line in printed[1:4]]
    encoder = load_encoder(run_dir, device="cpu")
    target = encoder.encode(b) - encoder.encode(a) + encoder.encode(c)
    candidates = [s for s in pool if s not in (a, b, c)]
    scores = encoder.similarity(target, encoder.encode(candidates))[0].numpy()
    expected = [candidates[i] for i in np.argsort(-scores, kind="stable")[:3]]
    assert shown == expected and not {a, b, c} & set(shown)
    assert main(["neighbours", f"run={run_dir}", f"query={a}|{b}", "analogy=true"]) == 2
    assert (
        'analogy=true reads query="a|b|c" (a is to b as c is to ?): 2 sentences given'
        in capsys.readouterr().err
    )


def test_an_ensemble_averages_each_runs_log_probabilities_weighted_by_its_validation_accuracy(
    tiny_data, senteval, tmp_path
):
    # Quick-Thoughts 4.4.2: each encoder's own classifier; per item, the log-probabilities'
    # average weighted by the classifiers' normalised validation accuracies.
    a, _ = start_run(tiny_data, tmp_path / "a", "hidden=4")
    b, _ = start_run(tiny_data, tmp_path / "b", "encoder=gru", "hidden=6", "pooling=last")
    common = [
        "mode=fast",
        "tasks=MR,CR",
        f"data={senteval}",
        f"vectors={tiny_data['vectors']}",
        "wandb=disabled",
    ]
    for run in (a, b):
        assert main(["transfer", f"run={run}", *common]) == 0
    assert (
        output_folder(TransferConfig(run=f"{a},{b}", ensemble="mean")) == tmp_path.absolute() / "ensemble-a+b"
    )
    assert main(["transfer", f"run={a},{b}", "ensemble=mean", *common]) == 0
    folder = tmp_path / "ensemble-a+b"
    report = json.loads((folder / "transfer-fast.json").read_text())
    assert report["encoder"] == "ensemble-a+b" and report["dim"] == 8 + 6
    items = np.load(folder / "transfer-fast.items.npz")
    for task in ("MR", "CR"):
        alone = [json.loads((run / "transfer-fast.json").read_text())["results"][task] for run in (a, b)]
        log_probs = [np.load(run / "transfer-fast.items.npz")[f"{task}/log_probs"] for run in (a, b)]
        weights = np.array([r["dev_acc"] for r in alone]) / sum(r["dev_acc"] for r in alone)
        expected = (weights[0] * log_probs[0].astype(np.float64) + weights[1] * log_probs[1]).argmax(axis=1)
        result = report["results"][task]
        assert [result["acc:a"], result["acc:b"]] == [r["acc"] for r in alone]
        assert [result["weight:a"], result["weight:b"]] == pytest.approx(weights.tolist())
        np.testing.assert_array_equal(items[f"{task}/predicted"], expected)
        assert result["acc"] == pytest.approx(float((expected == items[f"{task}/gold"]).mean()))


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"run": "a"}, "give run=runs/a,runs/b"),
        ({"run": "a,b", "tasks": "MR,STS14"}, "STS14 fit no classifier"),
        ({"run": "a,b", "pooling": "selfattn", "tasks": "MR"}, "leave out pooling=selfattn"),
    ],
)
def test_an_ensemble_that_cannot_be_formed_is_refused(keys, message):
    with pytest.raises(UserError, match=message):
        TransferConfig(ensemble="mean", **keys)


def test_an_ensembles_tasks_are_the_classification_ones():
    names = TransferConfig(run="a,b", ensemble="mean").task_names
    assert "MR" in names and "TREC" in names and "SICK-E" in names
    assert not {"STS14", "SICK-R", "STSB"} & set(names)
