"""The seeds' other objectives as tasks: qt (Quick-Thoughts), mnrl (in-batch ranking),
sts (similarity regression), the GRU encoder, and several NLI sources in one run."""

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from mtl import load_encoder
from mtl.cli import main
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.encoders.base import EncoderConfig, build_encoder, frozen_embedding
from mtl.models.encoders.config import GRUOptions, TransformerOptions
from mtl.models.heads import InBatchScores
from mtl.runs import read_metrics
from mtl.tasks import build_task, named_config
from mtl.tasks.qt import neighbour_labels, neighbour_targets
from mtl.tasks.ranking import classifsquad_triples, snli_triples
from mtl.train.loop import run

from .conftest import FIXTURES, args_for, exported_encoder, start_run

CORPUS = FIXTURES / "corpus_tiny.txt"
QT = ("tasks=nli,qt", f"qt.corpus={CORPUS}", f"qt.dev={CORPUS}", "qt.batch=6", "qt.steps=2")
SKIPTHOUGHT = (
    "tasks=skipthought",
    f"skipthought.corpus={CORPUS}",
    f"skipthought.dev={CORPUS}",
    "skipthought.batch=8",
    "skipthought.vocab=50",
    "encoder=gru",
)
MNRL = ("tasks=nli,mnrl", f"mnrl.source={FIXTURES / 'snli_tiny'}", "mnrl.batch=6", "mnrl.steps=2")


def task(name, *keys):
    from mtl.config import apply_overrides

    entry, config = named_config(name)
    return build_task(entry, apply_overrides(config, list(keys)))


# ---- Quick-Thoughts: targets and loss by hand --------------------------------------------------


def test_qt_targets_for_a_batch_of_6_sentences_with_context_3():
    # Two documents of 3 sentences: a b c | d e f. Each sentence's targets are its previous and
    # next sentence of the same document; c and d are neighbours in the batch but not in a document.
    labels = torch.tensor(neighbour_labels([["a", "b", "c"], ["d", "e", "f"]], radius=1))
    expected = torch.tensor(
        [
            [0, 1, 0, 0, 0, 0],  # a: b
            [1, 0, 1, 0, 0, 0],  # b: a, c
            [0, 1, 0, 0, 0, 0],  # c: b
            [0, 0, 0, 0, 1, 0],  # d: e
            [0, 0, 0, 1, 0, 1],  # e: d, f
            [0, 0, 0, 0, 1, 0],  # f: e
        ],
        dtype=torch.float32,
    )
    assert torch.equal(neighbour_targets(labels, 0, 6, radius=1), expected)
    # A rank holding the batch's rows 3..5 (offset 3) sees the same rows of the same matrix.
    assert torch.equal(neighbour_targets(labels[3:], 3, 6, radius=1), expected[3:])
    # context=5: two on each side, within the document.
    wide = neighbour_targets(torch.tensor(neighbour_labels([["a", "b", "c", "d"]], radius=2)), 0, 4, radius=2)
    assert wide.tolist() == [[0, 1, 1, 0], [1, 0, 1, 1], [1, 1, 0, 1], [0, 1, 1, 0]]


def test_qt_loss_and_recall_are_the_authors_soft_target_cross_entropy():
    qt = task("qt", "context=3")
    labels = torch.tensor(neighbour_labels([["a", "b", "c"], ["d", "e", "f"]], radius=1))
    logits = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    logits.fill_diagonal_(0.0)  # S2V: the sentence's own score is 0, kept as a candidate
    losses = qt.losses(InBatchScores(logits, 0), labels)
    for row, targets in enumerate([[1], [0, 2], [1], [4], [3, 5], [4]]):
        log_p = torch.log_softmax(logits[row], dim=0)
        assert losses[row].item() == pytest.approx(
            -sum(log_p[t].item() for t in targets) / len(targets), rel=1e-5
        )
    recall = qt.scores(InBatchScores(logits, 0), labels)
    best = logits.argmax(dim=1).tolist()
    assert recall.tolist() == [
        float(b in t) for b, t in zip(best, [[1], [0, 2], [1], [4], [3, 5], [4]], strict=True)
    ]


def test_qt_head_scores_f_against_g_with_its_own_score_zeroed():
    qt = task("qt")
    torch.manual_seed(0)
    encoder = build_encoder(
        frozen_embedding(torch.randn(30, 4)), EncoderConfig(encoder="gru", hidden=5, pooling="last")
    )
    head = qt.head(encoder, 0, 0, 0.0)
    tokens, lengths = torch.tensor([[2, 3, 0], [4, 5, 6], [7, 0, 0]]), torch.tensor([2, 3, 1])
    out = head(encoder, [(tokens, lengths)])
    f, g = encoder(tokens, lengths), head.output_encoder(tokens, lengths)
    expected = f @ g.T
    expected.fill_diagonal_(0.0)
    torch.testing.assert_close(out.logits, expected)
    assert out.offset == 0
    assert head.output_encoder.embedding is encoder.embedding  # the frozen vectors are shared
    assert not torch.equal(head.output_encoder.gru.weight_ih_l0, encoder.gru.weight_ih_l0)  # own parameters


def test_qt_context_must_be_an_odd_window():
    with pytest.raises(UserError, match=r"qt.context=4: the window holds the sentence"):
        task("qt", "context=4")


# ---- in-batch ranking and STS -------------------------------------------------------------------


def stub_encoder(*outputs: torch.Tensor):
    """An encoder of 4 dimensions that returns `outputs` in turn (a head's columns' embeddings)."""
    embeddings = iter(outputs)

    def encoder(tokens, lengths):
        return next(embeddings)

    encoder.pair_model, encoder.output_dim = False, 4
    return encoder


def test_mnrl_loss_is_cross_entropy_of_scaled_cosines_against_the_own_positive():
    mnrl = task("mnrl", "scale=20")
    torch.manual_seed(0)
    anchors, positives, negatives = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    encoder = stub_encoder(anchors, positives, negatives)
    head = mnrl.head(encoder, 0, 0, 0.0)
    out = head(encoder, [(None, None)] * 3)
    losses = mnrl.losses(out, torch.zeros(3, dtype=torch.long))
    candidates = torch.cat([positives, negatives])
    for row in range(3):
        cosines = torch.nn.functional.cosine_similarity(anchors[row][None], candidates)
        expected = -torch.log_softmax(20 * cosines, dim=0)[row]
        assert losses[row].item() == pytest.approx(expected.item(), rel=1e-5)
    # sentence-transformers' own loss on the same embeddings: mtl keeps its few lines because its
    # tasks train any encoder (a GloVe BiLSTM too), where the library's losses need its model
    try:  # its home since sentence-transformers 6 (the old path warns)
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:
        from sentence_transformers.losses import MultipleNegativesRankingLoss

    theirs = MultipleNegativesRankingLoss(torch.nn.Identity(), scale=20.0)
    reference = theirs.compute_loss_from_embeddings([anchors, positives, negatives], None)
    assert losses.mean().item() == pytest.approx(reference.item(), rel=1e-6)


def test_mnrl_without_in_batch_negatives_ranks_each_positive_above_its_own_negative_alone():
    """in_batch_negatives=false: the loss is the two-way softmax of the anchor's own positive
    against its own provided negative; the batch's other sentences are no candidates (sentence-
    transformers' MultipleNegativesRankingLoss on a batch of one, per anchor); without hard
    negatives it is refused (nothing would be ranked)."""
    mnrl = task("mnrl", "scale=20", "in_batch_negatives=false")
    torch.manual_seed(0)
    anchors, positives, negatives = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    encoder = stub_encoder(anchors, positives, negatives)
    head = mnrl.head(encoder, 0, 0, 0.0)
    losses = mnrl.losses(head(encoder, [(None, None)] * 3), torch.zeros(3, dtype=torch.long))
    for row in range(3):
        own = torch.stack([positives[row], negatives[row]])
        cosines = torch.nn.functional.cosine_similarity(anchors[row][None], own)
        expected = -torch.log_softmax(20 * cosines, dim=0)[0]
        assert losses[row].item() == pytest.approx(expected.item(), rel=1e-5)
    with pytest.raises(UserError, match="in_batch_negatives=false ranks each positive above its provided"):
        task("mnrl", "in_batch_negatives=false", "hard_negatives=false").head(encoder, 0, 0, 0.0)


def test_matryoshka_adds_the_weighted_loss_at_each_width():
    """Kusupati et al. 2022 as sentence-transformers' MatryoshkaLoss: the loss of the cosines on the
    first w dimensions, weighted, summed over the widths (the full width only where listed)."""
    mnrl = task("mnrl", "scale=20", "matryoshka=4,2", "matryoshka_weights=1,0.5")
    torch.manual_seed(0)
    anchors, positives, negatives = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)

    def encoder(tokens, lengths):
        return next(embeddings)

    encoder.pair_model, encoder.output_dim = False, 4
    head = mnrl.head(encoder, 0, 0, 0.0)
    embeddings = iter([anchors, positives, negatives])
    losses = mnrl.losses(head(encoder, [(None, None)] * 3), torch.zeros(3, dtype=torch.long))

    def at_width(width: int) -> torch.Tensor:
        a = torch.nn.functional.normalize(anchors[:, :width], dim=1)
        c = torch.nn.functional.normalize(torch.cat([positives, negatives])[:, :width], dim=1)
        return torch.nn.functional.cross_entropy(20 * a @ c.T, torch.arange(3), reduction="none")

    torch.testing.assert_close(losses, at_width(4) + 0.5 * at_width(2))
    head.eval()  # evaluation scores the full width alone
    embeddings = iter([anchors, positives, negatives])
    torch.testing.assert_close(
        mnrl.losses(head(encoder, [(None, None)] * 3), torch.zeros(3, dtype=torch.long)), at_width(4)
    )


def test_qt_matryoshka_scores_f_against_g_at_each_width():
    qt = task("qt", "matryoshka=5,2", "matryoshka_weights=1,0.25")
    torch.manual_seed(0)
    encoder = build_encoder(
        frozen_embedding(torch.randn(30, 4)), EncoderConfig(encoder="gru", hidden=5, pooling="last")
    )
    head = qt.head(encoder, 0, 0, 0.0)
    tokens, lengths = torch.tensor([[2, 3, 0], [4, 5, 6], [7, 0, 0]]), torch.tensor([2, 3, 1])
    f, g = encoder(tokens, lengths), head.output_encoder(tokens, lengths)
    labels = torch.tensor(neighbour_labels([["a", "b", "c"]], radius=1))

    def at_width(width: int) -> torch.Tensor:
        logits = f[:, :width] @ g[:, :width].T
        return qt.losses(InBatchScores(logits.fill_diagonal_(0.0), 0), labels)

    out = head(encoder, [(tokens, lengths)])
    torch.testing.assert_close(qt.losses(out, labels), at_width(5) + 0.25 * at_width(2))
    head.eval()  # evaluation scores the full width alone
    out = head(encoder, [(tokens, lengths)])
    assert out.truncated == ()
    torch.testing.assert_close(qt.losses(out, labels), at_width(5))


def test_sts_matryoshka_regresses_the_cosine_at_each_width():
    sts = task("sts", "matryoshka=4,1", "matryoshka_weights=1,0.5")
    torch.manual_seed(0)
    first, second = torch.randn(3, 4), torch.randn(3, 4)
    labels = torch.tensor([0.0, 1.0, 0.25])

    def encoder(tokens, lengths):
        return next(embeddings)

    encoder.pair_model, encoder.output_dim = False, 4
    head = sts.head(encoder, 0, 0, 0.0)

    def at_width(width: int) -> torch.Tensor:
        return (torch.nn.functional.cosine_similarity(first[:, :width], second[:, :width]) - labels) ** 2

    embeddings = iter([first, second])
    out = head(encoder, [(None, None)] * 2)
    torch.testing.assert_close(sts.losses(out, labels), at_width(4) + 0.5 * at_width(1))
    torch.testing.assert_close(sts.scores(out, labels), -at_width(4))  # what a step logs: the full width
    head.eval()  # evaluation: the full width's cosines, as the corpus metrics read them
    embeddings = iter([first, second])
    torch.testing.assert_close(
        head(encoder, [(None, None)] * 2), torch.nn.functional.cosine_similarity(first, second)
    )


def test_classification_matryoshka_trains_a_classifier_per_width():
    """The MRL paper's classification: a classifier of its own on each width's features
    ([u; v; |u-v|; u*v] of the first w dimensions), the full width's being the task's own."""
    nli = task("nli", "matryoshka=8,3", "matryoshka_weights=1,0.5")
    torch.manual_seed(0)
    encoder = build_encoder(frozen_embedding(torch.randn(30, 6)), EncoderConfig(encoder="bilstm", hidden=4))
    head = nli.head(encoder, 5, 1, 0.0)
    assert list(head.width_classifiers) == ["3"]  # 8 is the full width: the task's own classifier
    premises = (torch.tensor([[2, 3, 0], [4, 5, 6]]), torch.tensor([2, 3]))
    hypotheses = (torch.tensor([[7, 8], [9, 0]]), torch.tensor([2, 1]))
    labels = torch.tensor([0, 2])
    out = head(encoder, [premises, hypotheses])
    u, v = encoder(*premises), encoder(*hypotheses)

    def loss(classifier, width):
        a, b = u[:, :width], v[:, :width]
        features = torch.cat([a, b, (a - b).abs(), a * b], dim=-1)
        return torch.nn.functional.cross_entropy(classifier(features), labels, reduction="none")

    expected = loss(head.classifier, 8) + 0.5 * loss(head.width_classifiers["3"], 3)
    torch.testing.assert_close(nli.losses(out, labels), expected)
    torch.testing.assert_close(nli.scores(out, labels), nli.scores(out.full, labels))  # the full width's
    head.eval()
    torch.testing.assert_close(head(encoder, [premises, hypotheses]), out.full)  # evaluation: full width


@pytest.mark.parametrize(
    "keys, message",
    [
        (SKIPTHOUGHT + ("skipthought.matryoshka=4",), "a skipthought task does not train at several widths"),
        (("encoder=decomposable", "tasks=nli", "nli.matryoshka=4"), "has no sentence embedding to cut"),
        (("tasks=nli", "nli.matryoshka_weights=1,2"), "nli.matryoshka_weights= weighs the widths"),
        (SKIPTHOUGHT + ("skipthought.matryoshka_weights=1",), "a skipthought task does not train at"),
    ],
    ids=["skipthought", "decomposable", "weights-alone", "skipthought-weights"],
)
def test_matryoshka_where_it_cannot_apply_is_one_line(tiny_data, tmp_path, keys, message):
    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.loop.trainer import Trainer

    with pytest.raises(UserError, match=message):
        config = resolve_inputs(run.config_from_args(args_for(tiny_data, tmp_path / "run", *keys)))
        Trainer(config, tmp_path / "run", progress=False)


@pytest.mark.parametrize(
    "keys, message",
    [
        (
            ("matryoshka=8,4",),
            r"mnrl.matryoshka=8,4: the encoder's embeddings have 4 dimensions: give distinct widths from 1 to 4",
        ),
        (("matryoshka=4,4",), r"give distinct widths from 1 to 4"),
        (("matryoshka=4,half",), r"mnrl.matryoshka=4,half: half is not a whole number"),
        (
            ("matryoshka=4,2", "matryoshka_weights=1"),
            r"give one weight per width of mnrl.matryoshka=4,2 \(2\)",
        ),
        (
            ("matryoshka_weights=1,2",),
            r"mnrl.matryoshka_weights= weighs the widths of mnrl.matryoshka=: give those too",
        ),
    ],
)
def test_matryoshka_widths_are_checked_against_the_encoder(keys, message):
    def encoder(tokens, lengths):
        raise AssertionError

    encoder.pair_model, encoder.output_dim = False, 4
    with pytest.raises(UserError, match=message):
        task("mnrl", *keys).head(encoder, 0, 0, 0.0)
    with pytest.raises(UserError, match=message.replace("mnrl.", "sts.")):
        task("sts", *keys).head(encoder, 0, 0, 0.0)


def test_snli_triples_pair_each_entailment_with_a_contradiction_of_its_premise():
    pairs = LabelledTexts(
        [["p", "p", "p", "p", "q", "q"], ["e1", "n", "c1", "e2", "e", "n"]], [0, 1, 2, 0, 0, 1]
    )
    triples = snli_triples(pairs, hard_negatives=True)
    assert triples.columns == [["p", "p"], ["e1", "e2"], ["c1", "c1"]]  # q has no contradiction
    assert snli_triples(pairs, hard_negatives=False).columns == [["p", "p", "q"], ["e1", "e2", "e"]]


def test_classifsquad_triples_rank_each_questions_correct_answer_above_its_first_wrong_one():
    # label 1: answer1 is the correct answer; a question's pairs share its correct answer
    pairs = LabelledTexts(
        [["q1", "q1", "q1", "q2"], ["w1", "a1", "w2", "a2"], ["a1", "w3", "a1", "w4"]], [0, 1, 0, 1]
    )
    triples = classifsquad_triples(pairs, hard_negatives=True)
    assert triples.columns == [["q1", "q2"], ["a1", "a2"], ["w1", "w4"]]  # one row a question
    assert classifsquad_triples(pairs, hard_negatives=False).columns == [["q1", "q2"], ["a1", "a2"]]


def test_squad_ranking_ranks_classifsquad_answers_and_scores_its_dev_alone(tiny_data, tmp_path):
    from mtl.data.classifsquad import load_classifsquad

    run_dir, summary = start_run(
        tiny_data, tmp_path / "run", "tasks=nli,squad_ranking",
        f"squad_ranking.source={tiny_data['classifsquad']}", "squad_ranking.batch=4", "squad_ranking.steps=2",
    )  # fmt: skip
    questions = set(load_classifsquad(tiny_data["classifsquad"], "train").columns[0])
    assert summary["steps/squad_ranking"] > 0
    assert "best/squad_ranking/dev/recall_at_1" in summary  # SQuAD's test is hidden: dev only
    assert not [key for key in summary if key.startswith("best/squad_ranking/test/")]
    record = json.loads((run_dir / "config.json").read_text())
    assert record["inputs"]["squad_ranking"]["sizes"]["train"] == len(questions)
    with pytest.raises(UserError, match=r"squad_ranking\.source="):
        start_run(tiny_data, tmp_path / "x", "tasks=nli,squad_ranking", f"squad_ranking.source={tmp_path}")


def test_sts_regresses_the_cosine_onto_the_scaled_score_and_reports_pearson_and_spearman():
    sts = task("sts", "low=1", "high=5")
    outputs, labels = torch.tensor([0.2, 0.9, 0.5]), torch.tensor([0.0, 1.0, 0.25])
    torch.testing.assert_close(sts.losses(outputs, labels), (outputs - labels) ** 2)
    values = sts.corpus_metrics(outputs.numpy(), labels.numpy())
    assert values["pearson"] == pytest.approx(stats.pearsonr(outputs, labels)[0])
    assert values["spearman"] == pytest.approx(1.0)


def test_skipthought_loss_is_each_neighbours_token_cross_entropy_by_hand():
    st = task("skipthought")
    st.word_classes = torch.tensor(
        [0, 0, 1, 2, 3, 0, 4, 5]
    )  # ids 0, 1 (padding, unknown) and 5: unknown class
    torch.manual_seed(0)
    vectors = torch.randn(8, 3)
    vectors[0] = 0.0  # the padding row, as a run's embedding matrix has it
    encoder = build_encoder(frozen_embedding(vectors), EncoderConfig(encoder="gru", hidden=4, pooling="last"))
    head = st.head(encoder, 0, 0, 0.0)
    sentence = (torch.tensor([[2, 3]]), torch.tensor([2]))
    previous = (torch.tensor([[4, 5, 6]]), torch.tensor([3]))
    following = (torch.tensor([[7, 0, 0]]), torch.tensor([1]))  # padded: its padding is no target
    out = head(encoder, [sentence, previous, following])
    thought = encoder(*sentence)[0]
    expected = 0.0
    for decoder, (target, length) in zip(head.decoders, (previous, following), strict=True):
        state = torch.zeros(1, 1, 4)
        word = torch.zeros(3)  # before the first word: the padding row's zeros
        for t in range(int(length)):
            _, state = decoder(torch.cat([word, thought])[None, None], state)
            log_p = torch.log_softmax(head.vocabulary(state[0, 0]), dim=0)
            expected -= log_p[st.word_classes[target[0, t]]].item()
            word = encoder.embedding(target[0, t])
    assert out[0, 0].item() == pytest.approx(expected, rel=1e-5)
    assert out[0, 1].item() == 4  # 3 + 1 words predicted
    assert st.losses(out, None)[0].item() == pytest.approx(expected / 4, rel=1e-5)
    assert st.corpus_metrics(out.detach().numpy(), None)["ppl"] == pytest.approx(
        math.exp(expected / 4), rel=1e-5
    )


def test_skipthought_keeps_the_checkpoint_of_lowest_perplexity(tiny_data, tmp_path):
    run_dir, summary = start_run(
        tiny_data, tmp_path / "st", *SKIPTHOUGHT, "max_steps=30", "eval_every=5", "lr=1"
    )
    dev = [
        r["skipthought/dev/ppl"]
        for r in read_metrics(run_dir / "metrics.jsonl")
        if "skipthought/dev/ppl" in r
    ]
    assert len(dev) == 6 and summary["best/skipthought/dev/ppl"] == min(dev)
    assert load_encoder(run_dir, device="cpu").dim == 8  # the encoder's state alone


# ---- the GRU encoder -----------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True])
def test_gru_last_state_is_the_final_hidden_state_of_each_sentence_alone(bidirectional):
    torch.manual_seed(0)
    embedding = frozen_embedding(torch.randn(20, 5))
    config = EncoderConfig(encoder="gru", hidden=3, pooling="last", options=GRUOptions(bidirectional))
    encoder = build_encoder(embedding, config)
    tokens, lengths = torch.tensor([[2, 3, 4, 0, 0], [5, 6, 7, 8, 9]]), torch.tensor([3, 5])
    batch = encoder(tokens, lengths)
    for row, length in enumerate(lengths.tolist()):
        _, final = encoder.gru(embedding(tokens[row : row + 1, :length]))
        torch.testing.assert_close(batch[row], final[:, 0].reshape(-1))  # padding changes nothing
    assert encoder.output_dim == 3 * (2 if bidirectional else 1)


def test_last_state_pooling_needs_a_recurrent_encoder():
    with pytest.raises(UserError, match="pooling=last needs a recurrent encoder"):
        EncoderConfig(
            encoder="transformer", hidden=8, pooling="last", options=TransformerOptions(transformer_heads=2)
        )


# ---- end to end ------------------------------------------------------------------------------------


def test_a_qt_run_encodes_sentences_as_f_then_g(tiny_data, tmp_path):
    run_dir, summary = start_run(
        tiny_data, tmp_path / "qt", *QT, "encoder=gru", "pooling=last", "max_steps=10"
    )
    assert summary["steps/qt"] == 4 and 0.0 <= summary["best/qt/dev/recall_at_1"] <= 1.0
    encoder = load_encoder(run_dir, device="cpu")
    assert encoder.dim == 2 * 8  # [f; g], hidden=8 each
    saved = exported_encoder(run_dir)
    assert list(saved["parts"]) == ["heads.qt.output_encoder"]
    sentence = ["a man plays a guitar ."]
    embedded = encoder.encode(sentence, progress=False)
    f, g = encoder.encoder.parts
    ids = encoder.token_ids(sentence)[0]
    tokens, lengths = torch.from_numpy(ids)[None], torch.tensor([len(ids)])
    with torch.inference_mode():
        expected = torch.cat([f(tokens, lengths), g(tokens, lengths)], dim=-1)
    np.testing.assert_allclose(embedded, expected.numpy(), rtol=1e-5, atol=1e-6)
    # A checkpoint names g too, so it loads as the same [f; g].
    best = load_encoder(run_dir / "checkpoints" / "best.pt", device="cpu")
    np.testing.assert_allclose(best.encode(sentence, progress=False), embedded, rtol=1e-5, atol=1e-6)


def test_a_qt_corpus_from_squad_passages_trains_with_nli_and_classifsquad(tiny_data, tmp_path, shared_data):
    _, summary = start_run(
        tiny_data,
        tmp_path / "run",
        "tasks=nli,squad,qt",
        "qt.corpus=squad",
        "qt.max_train=400",
        "max_eval=300",
        "qt.batch=50",
        "qt.steps=2",
        "max_steps=14",
    )
    assert [summary[f"steps/{t}"] for t in ("nli", "squad", "qt")] == [6, 4, 4]
    assert 0.0 < summary["best/qt/dev/recall_at_1"] <= 1.0


@pytest.mark.parametrize(
    "keys",
    [
        QT + ("encoder=gru", "qt.matryoshka=8,4"),
        MNRL,
        ("tasks=nli,sts", f"sts.source={FIXTURES / 'sts_tiny'}", "sts.steps=2", "sts.matryoshka=8,2"),
        SKIPTHOUGHT,
        ("tasks=nli,squad", "nli.matryoshka=16,4", "squad.matryoshka=8"),
    ],
    ids=["qt-matryoshka", "mnrl", "sts-matryoshka", "skipthought", "classification-matryoshka"],
)
def test_a_run_of_each_new_task_resumes_exactly(tiny_data, tmp_path, keys):
    _, straight = start_run(tiny_data, tmp_path / "straight", *keys, "max_steps=12", "eval_every=5")
    killed, _ = start_run(
        tiny_data, tmp_path / "killed", *keys, "max_steps=12", "eval_every=5", killed_after=7
    )
    _, resumed = run.resume(killed, progress=False)
    for key, value in straight.items():
        if key.startswith("best/"):
            assert resumed[key] == value, key
    first, second = (exported_encoder(d) for d in (tmp_path / "straight", killed))
    for key in first["encoder"]:
        assert torch.equal(first["encoder"][key], second["encoder"][key]), key
    losses = [
        [
            {k: v for k, v in r.items() if k == "global_step" or "/train/" in k or k.endswith("/grad_norm")}
            for r in read_metrics(d / "metrics.jsonl")
            if any(k.endswith("/train/loss") for k in r)
        ]
        for d in (tmp_path / "straight", killed)
    ]
    assert len(losses[0]) == 12 and losses[0] == losses[1]


def mnli_task_file(folder, kind: str) -> str:
    """A MultiNLI-format fixture as a second NLI task: of the nli kind, or as file-defined pairs."""
    path = folder / "mnli.toml"
    if kind == "nli":
        keys = 'train_split = "train"\ndev_split = "dev_matched"\ntest_split = ""\n'
    else:
        keys = (
            'train = "train.jsonl"\ndev = "dev_matched.jsonl"\nfirst = "sentence1"\nsecond = "sentence2"\n'
            'label = "gold_label"\nlabels = "entailment,neutral,contradiction"\n'
        )
    path.write_text(
        f'kind = "{kind}"\ndisplay = "MultiNLI"\nsource = "{FIXTURES / "mnli_tiny"}"\n{keys}steps = 2\nbatch = 4\n'
    )
    return str(path)


@pytest.mark.parametrize("kind", ["nli", "pairs"])
def test_two_nli_sources_and_a_file_defined_sick_e_train_in_one_run(tiny_data, tmp_path, shared_data, kind):
    mnli = mnli_task_file(tmp_path, kind)
    run_dir, summary = start_run(
        tiny_data,
        tmp_path / "run",
        "tasks=nli,experiments/tasks/sick.toml," + str(mnli),
        "sick.steps=2",
        "max_steps=14",
    )
    assert [summary[f"steps/{t}"] for t in ("nli", "sick", "mnli")] == [6, 4, 4]
    for key in ("best/nli/dev/acc", "best/sick/dev/acc", "best/mnli/dev/acc", "best/sick/test/acc"):
        assert 0.0 <= summary[key] <= 1.0, key
    recorded = json.loads((run_dir / "config.json").read_text())
    assert recorded["config"]["tasks"]["mnli"]["display"] == "MultiNLI"
    assert recorded["config"]["tasks"]["sick"]["display"] == "SICK-E"
    assert "best/mnli/test/acc" not in summary  # MultiNLI has no labelled test split
    assert {"snli", "mnli", "sick"} <= set(recorded["inputs"])  # each NLI source fingerprinted apart
    assert not math.isnan(summary["best/mnli/dev/acc"])


# ---- 1 process = 2 processes: in-batch candidates gathered over ranks ----------------------------


def test_two_processes_give_in_batch_tasks_the_loss_of_one(tiny_data, tmp_path):
    """Quick-Thoughts and MNRL in one run (one torchrun job for both): each task's loss at every
    step and its dev recall equal one process's."""
    from .test_distributed import assert_same_training, finished, one_thread, torchrun

    keys = (
        "tasks=nli,qt,mnrl", *QT[1:3], *MNRL[1:2], "encoder=gru",
        # 7 contiguous sentences per batch: rank 0 holds 4, rank 1 holds 3, and neighbours straddle them.
        "qt.batch=7", "qt.steps=3", "mnrl.batch=5", "mnrl.steps=3",
    )  # fmt: skip
    settings = (*keys, "device=cpu", "precision=fp32", "batch_nli=6", "max_steps=24", "eval_every=12")
    with one_thread():
        start_run(tiny_data, tmp_path / "one", *settings)
    code, output = finished(torchrun(2, *args_for(tiny_data, tmp_path / "two", *settings, "wandb=disabled")))
    assert code == 0, output
    assert_same_training(tmp_path / "one", tmp_path / "two")
    summaries = [json.loads((d / "summary.json").read_text()) for d in (tmp_path / "one", tmp_path / "two")]
    for task_name in ("qt", "mnrl"):
        losses = [
            [
                r[f"{task_name}/train/loss"]
                for r in read_metrics(d / "metrics.jsonl")
                if f"{task_name}/train/loss" in r
            ]
            for d in (tmp_path / "one", tmp_path / "two")
        ]
        assert len(losses[0]) >= 6, task_name
        np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5, err_msg=task_name)
        key = f"best/{task_name}/dev/recall_at_1"
        assert summaries[1][key] == pytest.approx(summaries[0][key], abs=1e-9)


# ---- equal time budgets and the comparison of objectives -----------------------------------------


def test_max_minutes_stops_after_that_much_training_time(tiny_data, tmp_path, monkeypatch):
    import types

    from mtl.train.step import strategy as step

    clock = iter(float(t) for t in range(0, 10_000, 3))  # every step takes 3 "seconds"
    monkeypatch.setattr(step, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    _, summary = start_run(tiny_data, tmp_path / "run", "max_steps=1000", "max_minutes=0.5")
    assert summary["stop_reason"] == "max_minutes"
    assert summary["global_step"] == 10 and summary["train_seconds"] == 30.0  # 10 steps of 3 s
    assert summary["examples/nli"] == 6 * 8 and summary["examples/squad"] == 4 * 4


def test_compare_objectives_transfers_each_member_and_writes_a_table_and_a_page(
    tiny_data, senteval, tmp_path
):
    from mtl.studies.objectives import CompareConfig, compare

    out = tmp_path / "sweep"
    for seed in (1, 2):  # `just sweep objectives seeds=2`: an objective's seeds are one row
        start_run(tiny_data, out / f"tasksnli-seed{seed}", "tasks=nli", "max_steps=4", f"seed={seed}")
    start_run(tiny_data, out / "tasksqt", *QT[1:], "tasks=qt", "max_steps=4")
    page = compare(CompareConfig(out=str(out), transfer_tasks="MR,CR", data=str(senteval), device="cpu"))
    table = (out / "comparison.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith(("| nli |", "| qt |"))]
    assert len(rows) == 2 and rows[0].count(" ± ") + rows[1].count(" ± ") == 3  # nli: MR, CR, mean
    assert "| nli | 2 |" in table and "| qt | 1 |" in table
    assert "Holm" in table and "| MR | tasks=nli | tasks=qt |" in table  # the verdicts below
    for member in ("tasksnli-seed1", "tasksnli-seed2", "tasksqt"):
        assert (out / member / "transfer-fast.json").is_file()
    text = page.read_text()
    assert text.startswith("<!doctype html>") and 'src="data:image/svg+xml;base64,' in text
    modified = (out / "tasksqt" / "transfer-fast.json").stat().st_mtime_ns
    compare(CompareConfig(out=str(out), transfer_tasks="MR,CR", data=str(senteval), device="cpu"))
    assert (out / "tasksqt" / "transfer-fast.json").stat().st_mtime_ns == modified  # not transferred again


def test_a_skipthought_run_encodes_with_its_encoder_and_transfers(tiny_data, senteval, tmp_path):
    from mtl.eval.transfer.suite import TransferConfig
    from mtl.eval.transfer.suite import run as transfer

    run_dir, _ = start_run(tiny_data, tmp_path / "st", *SKIPTHOUGHT, "pooling=last", "max_steps=4")
    encoder = load_encoder(run_dir, device="cpu")
    assert encoder.dim == 8  # the GRU's final state alone: the decoders are not part of the embedding
    sentence = ["a man plays a guitar ."]
    ids = encoder.token_ids(sentence)[0]
    with torch.inference_mode():
        state = encoder.encoder(torch.from_numpy(ids)[None], torch.tensor([len(ids)]))
    np.testing.assert_allclose(encoder.encode(sentence, progress=False), state.numpy(), rtol=1e-5, atol=1e-6)
    _, report = transfer(
        TransferConfig(
            run=str(run_dir), tasks="MR", mode="fast", data=str(senteval), wandb="disabled", device="cpu"
        )
    )
    assert report["dim"] == 8 and 0 <= report["results"]["MR"]["acc"] <= 1


def test_a_member_whose_objective_got_no_examples_is_marked_and_ranked_last(tiny_data, senteval, tmp_path):
    """Seen: an "nli + qt" member ranked first although its budget ended before any qt step."""
    from mtl.studies.objectives import CompareConfig, compare

    out = tmp_path / "sweep"
    start_run(tiny_data, out / "tasksnli", "tasks=nli", "max_steps=4")
    start_run(tiny_data, out / "tasksnli+qt", *QT[1:], "tasks=nli,qt", "steps_nli=10", "max_steps=4")
    compare(CompareConfig(out=str(out), transfer_tasks="MR,CR", data=str(senteval), device="cpu"))
    text = (out / "comparison.md").read_text()
    rows = [line for line in text.split("\n\n")[0].splitlines()[2:] if line]  # the table before the verdicts
    assert rows[-1].startswith("| nli + qt (no qt examples: not this mixture) |")
    assert rows[0].startswith("| nli |")


def test_an_mnrl_run_logs_its_false_negative_share_at_its_start(tiny_data, tmp_path):
    from mtl.data.batches import false_negative_share
    from mtl.train.callbacks.base import Callback

    class Streams(Callback):  # the run's own batches, as it draws them
        def on_train_begin(self, run_) -> None:
            self.stream = run_.setup.streams["mnrl"]

    seen = Streams()
    config = run.config_from_args(args_for(tiny_data, tmp_path / "run", *MNRL, "max_steps=2"))
    run_dir, _ = run.start(config, progress=False, callbacks=[seen])
    (first,) = [r for r in read_metrics(run_dir / "metrics.jsonl") if "false_negatives/mnrl" in r]
    assert first["global_step"] == 0 and "false_negatives/nli" not in first
    expected = false_negative_share(seen.stream.examples.sentences, seen.stream.epoch_batches(0))
    assert first["false_negatives/mnrl"] == expected and 0 <= expected < 1


def test_a_study_compares_in_batch_negatives_with_the_provided_ones_alone(
    tiny_data, tmp_path, senteval, capsys
):
    """just study compare-negatives: the configuration's mnrl tasks with in-batch negatives (the
    baseline) and with their provided negatives alone, each seed at equal compute, judged on transfer."""
    out = tmp_path / "negatives"
    train = [a for a in args_for(tiny_data, out, *MNRL) if not a.startswith(("out=", "max_steps="))]
    command = ["study", "compare-negatives", *train, "budget=steps:3", "seeds=2", "transfer_tasks=MR",
               f"transfer_data={senteval}", f"out={out}"]  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "compare-negatives.json").read_text())
    assert result["baseline"] == "in_batch" and {a: r["seeds"] for a, r in result["arms"].items()} == {
        "in_batch": 2,
        "provided": 2,
    }
    config = json.loads((out / "arms" / "provided-seed2" / "config.json").read_text())["config"]
    assert config["tasks"]["mnrl"]["in_batch_negatives"] is False
    assert [(r["task"], r["arm"]) for r in result["verdicts"]] == [("MR", "provided")]
    capsys.readouterr()
    nli_alone = [a for a in train if not a.startswith(("tasks=", "mnrl."))] + ["tasks=nli"]
    assert main(["study", "compare-negatives", *nli_alone, "budget=steps:3", f"out={tmp_path / 'x'}"]) == 2
    assert "give an mnrl task among tasks=" in capsys.readouterr().err


def test_a_study_compares_homogeneous_batches_with_batches_mixing_the_ranking_sources(
    tiny_data, tmp_path, senteval, capsys
):
    """just study compare-batches: each step's batch from one ranking task (drawn by size) against
    one task training on their union, so that batches mix them; every run holds every task."""
    out = tmp_path / "batches"
    ranking = [*MNRL[1:], f"squad_ranking.source={tiny_data['classifsquad']}", "squad_ranking.batch=6"]
    train = [a for a in args_for(tiny_data, out, "tasks=mnrl,squad_ranking", *ranking)
             if not a.startswith(("out=", "max_steps="))]  # fmt: skip
    command = ["study", "compare-batches", *train, "budget=steps:4", "seeds=2", "transfer_tasks=MR",
               f"transfer_data={senteval}", f"out={out}"]  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "compare-batches.json").read_text())
    assert result["baseline"] == "homogeneous"
    assert {arm: r["seeds"] for arm, r in result["arms"].items()} == {"homogeneous": 2, "mixed": 2}
    triples = (out / "union-triples.tsv").read_text().splitlines()
    sources = result["union"]["sources"]
    assert len(triples) == sources["mnrl"] + sources["squad_ranking"] and min(sources.values()) > 0
    for arm, trained in (("homogeneous", {"mnrl", "squad_ranking"}), ("mixed", {"union"})):
        record = json.loads((out / "arms" / f"{arm}-seed1" / "config.json").read_text())["config"]
        assert {name for name, task in record["tasks"].items() if task["train"]} == trained
        assert set(record["tasks"]) == {"mnrl", "squad_ranking", "union"}
        assert record["tasks"]["union"]["source"] == record["tasks"]["mnrl"]["source"]  # scored on its SNLI
        assert record["schedule"]["schedule"] == "proportional" and record["schedule"]["bucket"] is False
        summary = json.loads((out / "arms" / f"{arm}-seed1" / "summary.json").read_text())
        assert sum(summary.get(f"steps/{name}", 0) for name in trained) == 4
        assert set(result["false_negatives"][arm]) == trained
    assert [(r["task"], r["arm"]) for r in result["verdicts"]] == [("MR", "mixed")]
    assert "in-batch false negatives" in (out / "compare-batches.html").read_text()
    capsys.readouterr()
    assert main(["compare", str(out), "report=transfer-fast", "wandb=disabled"]) == 0  # the study's folder
    assert "homogeneous" in capsys.readouterr().out
    before = (out / "union-triples.tsv").read_bytes()
    assert main(command) == 0  # resumed: the same union, every run kept
    assert (out / "union-triples.tsv").read_bytes() == before
    capsys.readouterr()
    alone = [a for a in train if not a.startswith(("tasks=", "squad_ranking."))] + ["tasks=nli,mnrl"]
    unequal = [a.replace("squad_ranking.batch=6", "squad_ranking.batch=5") for a in train]
    for given, said in (
        (alone, "give two or more among tasks="),
        (unequal, "a mixed batch is one loss, so give them one batch="),
    ):
        assert main(["study", "compare-batches", *given, "budget=steps:3", f"out={tmp_path / 'x'}"]) == 2
        assert said in capsys.readouterr().err
