"""just merge-encoders: averaging, task arithmetic and TIES over encoders of one initialisation."""

import json
from pathlib import Path

import pytest
import torch

from mtl import cli
from mtl.errors import UserError
from mtl.eval.loading import load_encoder
from mtl.eval.merge import EMBEDDING, MergeConfig, merge_encoders, merge_states, ties_vector
from mtl.train.config.command_line import config_from_args
from mtl.train.loop.trainer import Trainer

from .conftest import args_for, one_error_line, start_run

SENTENCES = ["A man is playing a guitar .", "Two dogs run through the snow .", "zzunknownword sits"]


@pytest.fixture(scope="module")
def singles(tiny_data, tmp_path_factory):
    """An NLI-only and a ClassifSQuAD-only run of one seed: one initialisation, two vocabularies."""
    root = tmp_path_factory.mktemp("singles")
    nli, _ = start_run(tiny_data, root / "nli", "tasks=nli", "max_steps=6")
    squad, _ = start_run(tiny_data, root / "squad", "tasks=squad", "max_steps=6")
    return nli, squad


def merged(sources, out, **keys) -> dict:
    merge_encoders(MergeConfig(out=str(out), **keys), [str(s) for s in sources])
    return json.loads((out / "encoder.json").read_text())


def network(encoder) -> dict[str, torch.Tensor]:
    """The encoder's weights but its word vectors (whose rows follow its vocabulary)."""
    return {k: v for k, v in encoder.encoder.state_dict().items() if k != EMBEDDING}


def assert_same_encoder(a, b) -> None:
    for key, value in network(a).items():
        assert torch.equal(value, network(b)[key]), key
    assert torch.equal(
        a.encode(SENTENCES, convert_to_tensor=True), b.encode(SENTENCES, convert_to_tensor=True)
    )


@pytest.mark.parametrize(
    "keys",
    [
        {"method": "average"},
        {"method": "task_arithmetic", "lam": "0.5"},  # base + (1/2)(tau + tau)
        {"method": "ties", "lam": "1", "density": 1.0},
    ],
    ids=["average", "task_arithmetic", "ties"],
)
def test_merging_an_encoder_with_itself_returns_it_bitwise(singles, tmp_path, keys):
    nli, _ = singles
    record = merged([nli, nli], tmp_path / "self", **keys)
    parent, merge = load_encoder(nli, device="cpu"), load_encoder(tmp_path / "self", device="cpu")
    own = parent.vocabulary.words
    assert record["vocabulary"][: len(own)] == own
    rows = parent.encoder.state_dict()[EMBEDDING]
    assert torch.equal(merge.encoder.state_dict()[EMBEDDING][: len(own)], rows)
    assert_same_encoder(merge, parent)


@pytest.mark.parametrize("lam, which", [("0", 0), ("1", 1)])
def test_lam_0_and_1_return_either_parent(singles, tmp_path, lam, which):
    record = merged(singles, tmp_path / "m", lam=lam)
    assert record["merged"]["lam"] == float(lam) and record["merged"]["method"] == "average"
    assert_same_encoder(
        load_encoder(tmp_path / "m", device="cpu"), load_encoder(singles[which], device="cpu")
    )


def test_a_merge_records_its_parents_and_mixes_them(singles, tmp_path):
    record = merged(singles, tmp_path / "m", method="ties", lam="1")
    parents = record["merged"]["parents"]
    # relative to the merge's folder: a study copied whole reads its own parents
    assert [(tmp_path / "m" / p["path"]).resolve() for p in parents] == [
        (s / "encoder.json").resolve() for s in singles
    ]
    assert not any(Path(p["path"]).is_absolute() for p in parents)
    assert all(len(p["sha256"]) == 64 for p in parents)
    assert record["merged"]["base"] == {"rebuilt": "init (seed 1234)"} and record["merged"]["density"] == 0.2
    assert (
        cli.main(
            ["export-encoder", f"run={tmp_path / 'm'}", f"out={tmp_path / 'shared'}", "vocabulary=trained"]
        )
        == 0
    )
    shared = json.loads((tmp_path / "shared" / "encoder.json").read_text())["merged"]
    assert {k: v for k, v in shared.items() if k != "parents"} == {
        k: v for k, v in record["merged"].items() if k != "parents"
    }
    # the parents' paths, relative to the merge's folder, made relative to the export's
    assert [(tmp_path / "shared" / p["path"]).resolve() for p in shared["parents"]] == [
        (s / "encoder.json").resolve() for s in singles
    ]
    card = (tmp_path / "shared" / "encoder" / "README.md").read_text()
    assert "merged by `just merge-encoders` (ties, lam 1) from 2 encoders (nli, squad)" in card
    datasets = card.split("datasets:")[1].split("\n---")[0].split(":")[0]  # the front matter's list
    assert "stanfordnlp/snli" in datasets and "rajpurkar/squad" in datasets  # both parents' data
    merge = load_encoder(tmp_path / "m", device="cpu")
    for single in singles:  # neither parent: a real mixture of the two
        assert not torch.equal(
            network(merge)["lstm.weight_hh_l0"], network(load_encoder(single))["lstm.weight_hh_l0"]
        )
    assert merge.encode(SENTENCES).shape == (3, merge.dim)


def test_base_init_is_the_trainers_initial_encoder(singles, tiny_data, tmp_path):
    """task_arithmetic at lam 0 is the base: rebuilt from the seed, it equals what training started from."""
    nli, _ = singles
    merged([nli], tmp_path / "base", method="task_arithmetic", lam="0")
    start = Trainer(
        config_from_args(args_for(tiny_data, tmp_path / "fresh", "tasks=nli")),
        tmp_path / "fresh",
        progress=False,
    )
    initial = {k: v for k, v in start.run.model.encoder.state_dict().items() if k != EMBEDDING}
    base = network(load_encoder(tmp_path / "base", device="cpu"))
    assert initial.keys() == base.keys()
    assert all(torch.equal(initial[k], base[k]) for k in initial)
    merged([nli], tmp_path / "one", method="task_arithmetic", lam="1")  # base + (parent - base)
    assert_same_encoder(load_encoder(tmp_path / "one", device="cpu"), load_encoder(nli, device="cpu"))


def test_ties_trims_elects_and_averages_the_agreeing_entries():
    """The TIES paper's three steps on three task vectors of four entries, trimmed as the authors'
    code does at density 0.5: kept where |x| >= the (4 - 2)-th smallest magnitude (three entries)."""
    vectors = [
        {"w": torch.tensor([1.0, 2.0, -3.0, 0.5], dtype=torch.float64)},  # keeps 1, 2, -3
        {"w": torch.tensor([4.0, -0.1, 3.0, -0.2], dtype=torch.float64)},  # keeps 4, 3, -0.2
        {"w": torch.tensor([-1.0, 0.3, -1.5, 2.0], dtype=torch.float64)},  # keeps -1, -1.5, 2
    ]
    # entry 0: 1 + 4 - 1 > 0 -> mean(1, 4); entry 1: 2 alone; entry 2: -3 + 3 - 1.5 < 0 ->
    # mean(-3, -1.5); entry 3: -0.2 + 2 > 0 -> 2
    merged_vector = ties_vector(vectors, density=0.5)["w"]
    assert torch.allclose(
        merged_vector, torch.tensor([2.5, 2.0, -2.25, 2.0], dtype=torch.float64), atol=1e-12
    )
    base = {"w": torch.zeros(4)}
    parents = [{"w": v["w"].float()} for v in vectors]
    state = merge_states(parents, "ties", 0.5, base=base, density=0.5)
    assert torch.allclose(state["w"], torch.tensor([1.25, 1.0, -1.125, 1.0]), atol=1e-6)
    summed = merge_states(parents, "task_arithmetic", 1.0, base=base)["w"]
    assert torch.allclose(summed, sum(p["w"] for p in parents), atol=1e-6)


def test_a_weight_of_zero_keeps_negative_zero_and_leaves_a_parent_out():
    a = {"w": torch.tensor([-0.0, 1.0, float("inf")])}
    b = {"w": torch.tensor([5.0, float("nan"), 2.0])}
    out = merge_states([a, b], "average", None, weights=[1.0, 0.0])["w"]
    assert torch.equal(out, a["w"]) and torch.signbit(out[0])


def test_lam_is_chosen_on_dev_and_every_candidate_recorded(singles, tmp_path, shared_data):
    record = merged(
        singles, tmp_path / "m", method="task_arithmetic", lam="0.2,0.6,1.0", select="STS-B",
        data=str(shared_data / "senteval" / "downstream"),
    )  # fmt: skip
    dev = record["merged"]["dev_spearman"]
    assert list(dev) == ["0.2", "0.6", "1"] and all(set(scores) == {"STS-B"} for scores in dev.values())
    best = max(dev, key=lambda lam: dev[lam]["STS-B"])
    assert record["merged"]["lam"] == float(best) and record["merged"]["select"] == "STS-B"
    # a lam at its grid's end is said, with the values to try next
    edge = record["merged"]["edge"]
    assert (edge is None) == (best == "0.6") and (edge is None or "try lam=" in edge)


def test_a_greedy_soup_keeps_an_encoder_only_where_the_dev_score_does_not_fall(
    singles, tmp_path, shared_data
):
    """greedy=true (Wortsman et al. 2022): the encoders by their own dev score, the best alone
    first, each added where the average with it scores no lower; an encoder with itself stays
    itself bitwise; one left out weighs exactly 0."""
    data = str(shared_data / "senteval" / "downstream")
    nli, squad = singles
    itself = merged([nli, nli], tmp_path / "self", greedy=True, select="STS-B", data=data)["merged"]
    assert itself["greedy"]["kept"] == [str(nli), str(nli)] and itself["weights"] == [0.5, 0.5]
    assert_same_encoder(load_encoder(tmp_path / "self", device="cpu"), load_encoder(nli, device="cpu"))
    record = merged(singles, tmp_path / "m", greedy=True, select="STS-B", data=data)["merged"]
    greedy, own = record["greedy"], record["greedy"]["own_dev"]
    assert greedy["order"] == sorted(own, key=lambda source: -own[source])
    (tried,) = greedy["tried"]
    assert tried["kept"] == (tried["soup_dev"] >= own[greedy["order"][0]])
    assert record["weights"] == (
        [0.5, 0.5] if tried["kept"] else [float(str(s) == greedy["order"][0]) for s in singles]
    )
    if not tried["kept"]:  # the one left out weighs exactly 0: the soup is its best ingredient
        assert_same_encoder(
            load_encoder(tmp_path / "m", device="cpu"), load_encoder(greedy["order"][0], device="cpu")
        )
    with pytest.raises(UserError, match="greedy=true chooses which encoders an average keeps"):
        merged(singles, tmp_path / "t", greedy=True, method="ties")


def test_a_grids_edge_names_the_next_values():
    from mtl.eval.merge import GRIDS, edge_note

    assert edge_note(list(GRIDS["ties"]), 2.0) == (
        "lam 2 is the largest value tried, so the best may lie beyond it: try lam=2.1,2.2,2.3,2.4"
    )
    assert edge_note([0.2, 0.6, 1.0], 0.2).endswith("try lam=0.15,0.1,0.05")
    assert edge_note([0.2, 0.6, 1.0], 0.6) is None and edge_note([0.5, 1.0], 1.0) is None
    # an average's lam is a share, at most 1: only what it takes is named
    assert edge_note([0.2, 0.4, 0.6, 0.8], 0.8, most=1.0).endswith("try lam=1")
    assert edge_note([0.2, 0.6, 1.0], 1.0, most=1.0) is None


@pytest.mark.parametrize(
    "extra, says",
    [
        (["lam=1.5"], "lam=1.5: '1.5' is not a number from 0 to 1"),
        (["weights=1,2,3"], "weights=1,2,3: give 2 non-negative numbers"),
        (["select=MR", "method=ties"], "select=MR: it has no dev split of scored sentence pairs"),
    ],
)
def test_bad_settings_get_one_line(singles, tmp_path, capsys, extra, says, shared_data):
    args = [f"run={s}" for s in singles] + [
        f"out={tmp_path / 'm'}",
        f"data={shared_data / 'senteval' / 'downstream'}",
        *extra,
    ]
    assert cli.main(["merge-encoders", *args]) != 0
    assert says in one_error_line(capsys)
    assert not (tmp_path / "m" / "encoder.json").exists()


def test_encoders_of_other_architectures_or_seeds_are_refused(tiny_data, singles, tmp_path, capsys):
    nli, _ = singles
    wider, _ = start_run(tiny_data, tmp_path / "wider", "tasks=nli", "max_steps=2", "hidden=16")
    reseeded, _ = start_run(tiny_data, tmp_path / "reseeded", "tasks=nli", "max_steps=2", "seed=7")
    for other, method, says in [
        (wider, "average", "differ in architecture"),
        (reseeded, "ties", "their seeds differ"),
        (
            reseeded,
            "average",
            "(seed 7) were trained from different initialisations: their average is no soup",
        ),
    ]:
        args = [f"run={nli}", f"run={other}", f"method={method}", f"out={tmp_path / 'm'}"]
        assert cli.main(["merge-encoders", *args, *(["lam=1"] if method != "average" else [])]) != 0
        assert says in one_error_line(capsys)
    assert not (tmp_path / "m" / "encoder.json").exists()
    args = [f"run={nli}", f"run={reseeded}", "different_seeds=true", f"out={tmp_path / 'm'}"]
    assert cli.main(["merge-encoders", *args]) == 0  # asked for: averaged all the same


def test_a_merge_that_overflows_writes_nothing_and_huge_weights_normalise(singles, tmp_path, capsys):
    """task_arithmetic at lam=1e308 overflows every weight it moves: one line, nothing written.
    weights=1e308,1e308 once summed to inf and made every weight 0 (a zero encoder): an equal average."""
    args = [f"run={s}" for s in singles]
    assert (
        cli.main(["merge-encoders", *args, "method=task_arithmetic", "lam=1e308", f"out={tmp_path / 'm'}"])
        != 0
    )
    assert "weights that are not finite" in one_error_line(capsys) and not (tmp_path / "m").exists()
    huge = merged(singles, tmp_path / "huge", weights="1e308,1e308")
    assert huge["merged"]["weights"] == [0.5, 0.5]
    equal = load_encoder(str(tmp_path / "huge"))
    plain = load_encoder(str(merged(singles, tmp_path / "plain") and tmp_path / "plain"))
    assert_same_encoder(equal, plain)


def test_a_merge_without_a_report_is_named_a_merge_not_a_non_run(singles, tmp_path, capsys):
    merged(singles, tmp_path / "m")
    assert cli.main(["compare", str(tmp_path / "m"), str(singles[0]), "report=transfer-fast"]) == 2
    said = one_error_line(capsys)
    assert "is a merged encoder (just merge-encoders) with no transfer report yet" in said


def test_a_merged_folder_has_a_sentence_transformers_folder_and_card_like_an_export(singles, tmp_path):
    """An exported run has encoder/ (sentence-transformers) with its card; a merge had none."""
    merged(singles, tmp_path / "m")
    card = (tmp_path / "m" / "encoder" / "README.md").read_text()
    assert "merged by `just merge-encoders` (average) from 2 encoders (nli, squad)" in card
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".m-st-")]  # the staging folder gone
    again = merge_encoders(MergeConfig(out=str(tmp_path / "m"), overwrite=True), [str(s) for s in singles])
    assert again.out == tmp_path / "m" and (tmp_path / "m" / "encoder" / "README.md").is_file()
