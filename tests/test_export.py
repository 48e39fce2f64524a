"""Every exportable encoder loads in sentence-transformers, without mtl, and gives mtl's embeddings."""

import json
import subprocess
import sys

import numpy as np
import pytest

from mtl import load_encoder

from .conftest import start_run

# Lower-cased and tokenized as mtl tokenizes (sentence-transformers splits on spaces only),
# every word in the tiny runs' vocabulary.
SENTENCES = ["a man is playing .", "two men run through the park .", "a man ."]
# What sentence-transformers' own tokenizer once gave no word or a different one: nothing, blanks,
# only unknown words, an unknown word among known ones, text as a person types it (punctuation on
# a word, capitals, a contraction).
MIXED = "a man qqzzx ."
HARD = ["", "  \t", "qqzzx", "qqzzx blorp", MIXED, "A man is playing.", "Two men don't run."]

WITHOUT_MTL = """
import json, sys
sys.modules["mtl"] = None  # any import of mtl fails: the folder must stand alone
import warnings
warnings.simplefilter("error")  # no "newly initialized" weights, no deprecated names
from sentence_transformers import SentenceTransformer
sentences = json.loads(sys.argv[1])
print(json.dumps([SentenceTransformer(f, device="cpu").encode(sentences).tolist() for f in sys.argv[2:]]))
"""


def encoded_by_sentence_transformers(*folders, sentences=SENTENCES) -> tuple[list[np.ndarray], str]:
    """Each folder's embeddings of `sentences`, all read by one process (it imports for seconds)."""
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MTL, json.dumps(sentences), *map(str, folders)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return [np.array(rows, dtype=np.float32) for rows in json.loads(done.stdout)], done.stderr


GLOVE_EXPORTS = {
    "bilstm-max": ("encoder=bilstm", "pooling=max"),
    "bilstm2-maxmean": ("encoder=bilstm2", "pooling=max+mean"),
    "lstm-last": ("encoder=lstm", "pooling=last"),
    "bilstm-bottleneck": ("encoder=bilstm", "pooling=mean", "bottleneck=6"),
    "bow-both": ("encoder=bow", "pooling=max", "embeddings=both"),  # one matrix [GloVe ; trained copy]
}


@pytest.fixture(scope="module")
def exports(tiny_data, tiny_bert, tmp_path_factory):
    """Every exportable kind of run, and what sentence-transformers makes of its folder."""
    root = tmp_path_factory.mktemp("exports")
    runs = {name: start_run(tiny_data, root / name, *extra) for name, extra in GLOVE_EXPORTS.items()}
    runs["hf"] = start_run(tiny_data, root / "hf", "encoder=hf", f"hf_model={tiny_bert}", "max_seq_length=16")
    theirs, stderr = encoded_by_sentence_transformers(
        *(run_dir / "encoder" for run_dir, _ in runs.values()), sentences=SENTENCES + HARD
    )
    return {
        name: (*run, embedded) for (name, run), embedded in zip(runs.items(), theirs, strict=True)
    }, stderr


@pytest.mark.parametrize("name", GLOVE_EXPORTS)
def test_a_glove_encoder_exports_a_sentence_transformers_folder(exports, name):
    (run_dir, summary, theirs), _ = exports[0][name], exports[1]
    folder = run_dir / "encoder"
    assert summary["sentence_transformers"] == "encoder"
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"modules.json", "config_sentence_transformers.json", "README.md", "model.safetensors"} <= files
    assert not any(name.endswith((".pt", ".bin", ".pkl", ".py")) for name in files), "nothing to run"
    words = json.loads((folder / "wordembedding_config.json").read_text())
    assert words["max_seq_length"] == 512  # data.max_tokens: the words mtl's encoder reads
    ours = load_encoder(run_dir, device="cpu")
    expected = ours.encode(SENTENCES)
    assert ours.coverage.tokens_found == ours.coverage.tokens  # every word is in the trained vocabulary
    np.testing.assert_allclose(theirs[: len(SENTENCES)], expected, rtol=1e-5, atol=1e-6)
    assert np.isfinite(theirs).all()  # once -inf in every dimension for "" and unknown words only
    # max over a bag of words: mtl leaves the unknown word out, sentence-transformers' WordWeights
    # can only make it a zero vector (the one difference, said in the folder's module)
    hard = [s for s in HARD if not (name == "bow-both" and s == MIXED)]
    rows = [len(SENTENCES) + HARD.index(s) for s in hard]
    np.testing.assert_allclose(theirs[rows], ours.encode(hard), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "encoder, kind", [("gru", "GRUEncoder"), ("innerattention", "InnerAttentionEncoder")]
)
def test_an_encoder_sentence_transformers_cannot_express_says_why(tiny_data, tmp_path, encoder, kind):
    # Inner attention is a BiLSTM underneath: its folder once held a plain BiLSTM-max, a
    # different, 4x narrower embedding than encode() gives.
    run_dir, summary = start_run(tiny_data, tmp_path / "run", f"encoder={encoder}")
    assert summary["sentence_transformers"] == f"sentence-transformers has no module for {kind}"
    assert not (run_dir / "encoder").exists()
    from mtl.train.loop.run import format_summary

    assert f"(no sentence-transformers folder: sentence-transformers has no module for {kind})" in (
        format_summary(run_dir, summary)
    )


def test_a_fine_tuned_transformer_loads_in_sentence_transformers_without_fresh_weights(exports):
    (run_dir, _, theirs), stderr = exports[0]["hf"], exports[1]
    folder = run_dir / "encoder"
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert config["similarity_fn_name"] == "cosine"
    assert "library_name: sentence-transformers" in (folder / "README.md").read_text()
    assert "newly initialized" not in stderr and "MISSING" not in stderr
    np.testing.assert_allclose(
        theirs, load_encoder(run_dir, device="cpu").encode(SENTENCES + HARD), rtol=1e-4, atol=1e-5
    )


def test_the_model_card_is_hub_ready(tiny_data, tmp_path):
    """The card's YAML as the Hub reads it: datasets, license, the exported checkpoint's scores."""
    from huggingface_hub import ModelCard

    run_dir, summary = start_run(tiny_data, tmp_path / "run")
    card = ModelCard.load(run_dir / "encoder" / "README.md")
    data = card.data
    assert data.library_name == "sentence-transformers" and data.pipeline_tag == "sentence-similarity"
    assert data.datasets == ["stanfordnlp/snli", "rajpurkar/squad"]  # local copies of SNLI and SQuAD
    assert data.license == "cc-by-sa-4.0" and data.base_model is None  # GloVe: no pretrained model
    results = {(r.dataset_name, r.dataset_split, r.metric_type): r.metric_value for r in data.eval_results}
    assert results[("SNLI", "validation", "accuracy")] == round(100 * summary["best/nli/dev/acc"], 2)
    assert results[("SNLI", "test", "accuracy")] == round(100 * summary["best/nli/test/acc"], 2)
    assert ("ClassifSQuAD", "validation", "accuracy") in results
    assert "github.com/)" not in card.text and "https://github.com/" not in card.content  # no placeholder
    assert f"| SNLI | dev | acc | {100 * summary['best/nli/dev/acc']:.2f} |" in card.text
    from mtl.train.loop.run import format_summary

    assert "seeded samples" not in format_summary(run_dir, summary)
    # max_eval= samples dev (20 of SNLI's 100 pairs) and leaves test whole; sample_test=true samples both
    sampled_dir, sampled = start_run(tiny_data, tmp_path / "sampled", "max_eval=20")
    assert sampled["scored_on"]["nli/dev"] == {"examples": 20, "of": 100, "sampled": True}
    assert sampled["scored_on"]["nli/test"] == {"examples": 100, "of": 100, "sampled": False}
    assert (
        "\n  (max_eval=20: nli/dev on a seeded sample of 20 of 100; squad/dev on a seeded sample of 20 of"
        in (format_summary(sampled_dir, sampled))
    )
    splits = {
        r.dataset_split for r in ModelCard.load(sampled_dir / "encoder" / "README.md").data.eval_results
    }
    assert {"validation (a seeded sample of 20 of 100)", "test"} <= splits
    both_dir, both = start_run(tiny_data, tmp_path / "both", "max_eval=20", "sample_test=true")
    assert both["scored_on"]["nli/test"] == {"examples": 20, "of": 100, "sampled": True}
    splits = {r.dataset_split for r in ModelCard.load(both_dir / "encoder" / "README.md").data.eval_results}
    assert "test (a seeded sample of 20 of 100)" in splits and "test" not in splits


def test_a_fine_tuned_models_card_names_its_base_model():
    from huggingface_hub import ModelCard

    from mtl.models.card import facts_of

    config = {
        "model": {"encoder": "hf", "options": {"hf_model": "sentence-transformers/all-MiniLM-L6-v2"}},
        "tasks": {"nli": {"kind": "nli", "source": "/data/snli"}, "qqp": {"kind": "pairs", "source": "/d/q"}},
    }
    facts = facts_of("run", config, {"best/nli/dev/acc": 0.8, "best/nli/dev/loss": 0.5}, {"nli": "SNLI"})
    assert facts.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert facts.datasets == ["stanfordnlp/snli"]  # a local pairs folder has no Hub id to name
    assert facts.scores == {"best/nli/dev/acc": 0.8}  # losses are not scores
    local = facts_of(
        "run", {"model": {"encoder": "hf", "options": {"hf_model": "/models/minilm"}}, "tasks": {}}, {}, {}
    )
    assert local.base_model is None  # a folder on this machine is not a Hub model
    assert local.fine_tuned_from == "minilm"  # but the card names it
    from mtl.models.card import card_text

    card = ModelCard(card_text(facts, 384, ["Transformer", "Pooling"]))
    assert card.data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert "Fine-tuned from [sentence-transformers/all-MiniLM-L6-v2]" in card.text
    assert "Fine-tuned from a local copy of `minilm`" in card_text(local, 384, ["Transformer", "Pooling"])


def test_a_local_model_folder_names_its_hub_id_when_it_records_its_own(tmp_path):
    from mtl.models.card import recorded_hub_id

    folder = tmp_path / "all-MiniLM-L6-v2"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"_name_or_path": "sentence-transformers/all-MiniLM-L6-v2"})
    )
    assert recorded_hub_id(str(folder)) == "sentence-transformers/all-MiniLM-L6-v2"
    # the shared MiniLM copy records the model it was trained from, not itself: not its base model
    (folder / "config.json").write_text(json.dumps({"_name_or_path": "nreimers/MiniLM-L6-H384-uncased"}))
    assert recorded_hub_id(str(folder)) is None


def test_push_encoder_uploads_the_folder_and_card_to_a_hub(
    tiny_data, senteval, tmp_path, monkeypatch, capsys
):
    """Against a local stand-in of the Hub's upload API: every file of encoder/ arrives byte for
    byte, but the card, whose license and loading example are set for the repository."""
    from huggingface_hub import ModelCard

    from mtl.cli import main

    from .hub_standin import HubStandIn

    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    transfer = ["transfer", f"run={run_dir}", "tasks=MR", "mode=fast", f"data={senteval}", "wandb=disabled"]
    assert main(transfer) == 0
    mr = json.loads((run_dir / "transfer-fast.json").read_text())["results"]["MR"]["acc"]
    hub = HubStandIn(tmp_path / "hub")
    monkeypatch.setenv("HF_TOKEN", "hf_standin")
    try:
        push = ["push-encoder", f"run={run_dir}", "repo=me/tiny-encoder", f"endpoint={hub.url}"]
        assert main([*push, "license=apache-2.0"]) == 0
    finally:
        hub.close()
    assert f"pushed {run_dir / 'encoder'} to me/tiny-encoder: {hub.url}/me/tiny-encoder/commit/" in (
        capsys.readouterr().out
    )
    uploaded, local = tmp_path / "hub" / "me" / "tiny-encoder", run_dir / "encoder"
    files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    assert sorted(p.relative_to(uploaded).as_posix() for p in uploaded.rglob("*") if p.is_file()) == files
    for name in files:
        if name != "README.md":
            assert (uploaded / name).read_bytes() == (local / name).read_bytes(), name
    card = ModelCard.load(uploaded / "README.md")
    assert card.data.license == "apache-2.0" and "License: apache-2.0." in card.text
    assert 'SentenceTransformer("me/tiny-encoder")' in card.text
    assert card.data.datasets == ModelCard.load(local / "README.md").data.datasets  # the rest as written
    # the run's transfer scores, each with the protocol that made them, in the text and model-index
    assert (
        f"| MR | acc | {100 * mr:.2f} |" in card.text
        and "fast protocol: scikit-learn logistic regression" in card.text
    )
    transfer = [r for r in card.data.eval_results if r.dataset_name == "SentEval MR"]
    assert [(r.metric_type, r.metric_value, r.metric_config) for r in transfer] == [
        ("accuracy", round(100 * mr, 2), "transfer-fast")
    ]
    assert (
        "## Training" in card.text
        and "- tasks: nli (SNLI; 3 steps of 8 per block), squad (ClassifSQuAD; 2 steps of 4 per block)"
        in card.text
    )
    assert ModelCard.load(local / "README.md").data.license == "cc-by-sa-4.0"  # the run's own is untouched
    assert all(auth == "Bearer hf_standin" for _, auth in hub.requests)
    assert len(hub.cards) == 1 and "license: apache-2.0" in hub.cards[0]  # the YAML the Hub checked


def test_push_encoder_without_a_hub_is_one_line(tiny_data, tmp_path, monkeypatch, capsys):
    import socket

    from mtl.cli import main

    run_dir, _ = start_run(tiny_data, tmp_path / "run", "encoder=gru")
    assert main(["push-encoder", f"run={run_dir}", "repo=me/x"]) == 2
    assert "has no sentence-transformers folder" in capsys.readouterr().err  # and why: GRU
    with socket.socket() as closed:  # a port nothing listens on: the Hub unreachable
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    glove_run, _ = start_run(tiny_data, tmp_path / "glove")
    capsys.readouterr()  # the training's own warnings
    monkeypatch.setenv("HF_TOKEN", "hf_standin")
    assert main(["push-encoder", f"run={glove_run}", "repo=me/x", f"endpoint=http://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: could not upload to the Hugging Face Hub at http://127.0.0.1:") and (
        err.endswith("log in with `hf auth login` or set HF_TOKEN")
    ), err
    assert len(err.splitlines()) == 1
    assert main(["push-encoder", f"run={glove_run}", "repo=no-slash"]) == 2
    assert "give the Hub repository as organization/name" in capsys.readouterr().err


def test_a_card_of_a_run_scored_on_samples_never_names_a_split_alone():
    from huggingface_hub import ModelCard

    from mtl.models.card import card_text, facts_of

    config = {"data": {"max_eval": 500}, "tasks": {"nli": {"kind": "nli", "source": "stanfordnlp/snli"}}}
    scores = {"best/nli/dev/acc": 0.61, "best/nli/test/acc": 0.6}
    card = ModelCard(card_text(facts_of("run", config, scores, {"nli": "SNLI"}), 8, ["Embeddings"]))
    splits = {r.dataset_split for r in card.data.eval_results}
    assert splits == {"validation (a seeded sample of at most 500)", "test (a seeded sample of at most 500)"}
    assert "| SNLI | test (a seeded sample of at most 500) | acc | 60.00 |" in card.text
    full = card_text(facts_of("run", {"tasks": config["tasks"]}, scores, {"nli": "SNLI"}), 8, ["Embeddings"])
    assert {r.dataset_split for r in ModelCard(full).data.eval_results} == {"validation", "test"}


def test_the_exported_tokenizer_splits_real_text_as_mtl_does(shared_data):
    """Text as people type it: the export's splitting rules against mtl's spaCy tokenizer on all of
    SNLI's dev sentences and SQuAD's dev questions (floors for what the folder's module says)."""
    from mtl.models.sentence_transformers import exported_words
    from mtl.text.tokenizer import Tokenizer

    snli = [
        line
        for side in ("s1", "s2")
        for line in (shared_data / "snli" / f"{side}.dev").read_text().splitlines()
    ]
    squad = json.loads((shared_data / "squad" / "dev-v1.1.json").read_text())
    questions = [qa["question"] for a in squad["data"] for p in a["paragraphs"] for qa in p["qas"]]
    for texts, floor in ((snli, 0.995), (questions, 0.96)):
        alike = sum(
            ours == theirs
            for ours, theirs in zip(Tokenizer().tokenize(texts), exported_words(texts), strict=True)
        )
        print(f"{alike:,} of {len(texts):,} ({alike / len(texts):.1%}) split alike")
        assert alike / len(texts) >= floor
