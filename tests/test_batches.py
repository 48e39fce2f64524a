import numpy as np
import pytest
import torch

from mtl.data.batches import SentenceTable, TaskExamples, TaskStream
from mtl.text.tokenizer import Tokenizer
from mtl.text.vocab import Vocabulary


def stream(size=103, batch=10, seed=(1, 0)):
    examples = TaskExamples(np.arange(size)[:, None], np.zeros(size, dtype=np.int64))
    lengths = np.random.default_rng(0).integers(1, 30, size)
    return TaskStream(examples, lengths, batch, seed=seed, window=3)


def take(s, count):
    return [s.next() for _ in range(count)]


def test_each_epoch_visits_every_example_once_in_a_new_order():
    s = stream()
    epoch0 = take(s, s.batches_per_epoch)
    assert [done for _, done in epoch0][-1] is True and not any(done for _, done in epoch0[:-1])
    assert sorted(np.concatenate([b for b, _ in epoch0]).tolist()) == list(range(103))
    assert max(len(b) for b, _ in epoch0) == 10
    epoch1 = take(s, s.batches_per_epoch)
    assert s.epoch == 2
    assert not all(np.array_equal(a, b) for (a, _), (b, _) in zip(epoch0, epoch1, strict=True))


def test_state_round_trip_continues_the_same_batches():
    s = stream()
    take(s, 13)
    state = s.state_dict()
    expected = take(s, 20)
    restored = stream()
    restored.load_state_dict(state)
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(expected, take(restored, 20), strict=True))


def test_batches_group_similar_lengths():
    s = stream(size=600, batch=20)
    lengths = s.example_lengths
    spread = np.mean([np.ptp(lengths[b]) for b, _ in take(s, s.batches_per_epoch)])
    assert spread < np.ptp(lengths) / 3


def test_in_batch_streams_never_put_a_sentence_twice_in_a_batch_and_resume_exactly():
    """SNLI-like pairs: each premise (anchor) with three hypotheses. Plain bucketed batches hold a
    premise twice (a false negative for an in-batch loss); `distinct` batches never do, keep every
    example once an epoch, stay bucketed by length, and resume from (epoch, position) exactly."""
    from mtl.data.batches import holds_repeats, without_repeats

    premises = np.repeat(np.arange(400), 3)  # 1,200 examples, 400 anchors
    pairs = np.stack([premises, 1000 + np.arange(1200)], axis=1)
    examples = TaskExamples(pairs, np.zeros(1200, dtype=np.int64))
    lengths = np.random.default_rng(0).integers(1, 30, 1200)[premises]  # a premise's pairs are equally long

    def make(distinct, window=4):
        return TaskStream(
            examples, lengths, 32, seed=(3, 1), window=window, distinct=pairs if distinct else None
        )

    def padding(batches):  # the share of a padded batch that is padding
        padded = sum(len(b) * lengths[b].max() for b in batches)
        return 1 - sum(lengths[b].sum() for b in batches) / padded

    plain, fixed = make(False), make(True)
    assert plain.repeats_share() == 0.0 and 0.5 < fixed.repeats_share() <= 1.0  # most plain batches repeat
    for s in (plain, fixed):
        batches = [b for b, _ in take(s, s.batches_per_epoch)]
        assert sorted(np.concatenate(batches).tolist()) == list(range(1200)) and s.epoch == 1
        repeated = sum(holds_repeats(pairs[b]) for b in batches)
        if s is fixed:
            assert repeated == 0 and sum(len(b) < 32 for b in batches) <= 2
            # still bucketed: less padding than unsorted batches (more than with repeats, the price
            # of 32 distinct anchors where a premise's three pairs are equally long)
            assert padding(batches) < padding(make(True, window=1).epoch_batches(0)) - 0.1
        else:
            assert repeated > len(batches) / 2
    again = make(True)
    take(again, 7)
    state, expected = again.state_dict(), take(again, 60)
    restored = make(True)
    restored.load_state_dict(state)
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(expected, take(restored, 60), strict=True))
    # an example is only moved to a later batch, never dropped, whatever repeats
    assert [b.tolist() for b in without_repeats(np.arange(4), np.array([[0], [0], [0], [1]]), 2)] == [
        [0, 3],
        [1],
        [2],
    ]


def test_sentence_table_pads_and_counts_lengths():
    table = SentenceTable(["a b c", "b", "a b c", "", "z z"], Tokenizer())
    table.index_with(Vocabulary(["a", "b", "c"]))
    tokens, lengths = table.batch(table.rows(["a b c", "b", "", "z z"]))
    assert tokens.tolist() == [[2, 3, 4], [3, 0, 0], [1, 0, 0], [1, 1, 0]]
    assert lengths.tolist() == [3, 1, 1, 2]
    assert tokens.dtype == torch.int64


def test_without_buckets_batches_are_a_plain_shuffle():
    examples = TaskExamples(np.zeros((400, 1), dtype=np.int64), np.zeros(400, dtype=np.int64))
    lengths = np.arange(400)
    bucketed = TaskStream(examples, lengths, 20, seed=[1], window=50).epoch_batches(0)
    plain = TaskStream(examples, lengths, 20, seed=[1], window=1).epoch_batches(0)
    spread = [lengths[b].max() - lengths[b].min() for b in plain]
    assert max(lengths[b].max() - lengths[b].min() for b in bucketed) == 19  # sorted runs of 20
    assert np.median(spread) > 200  # random lengths of 0..399 in each batch
    assert sorted(np.concatenate(plain).tolist()) == list(range(400))


def test_max_eval_draws_a_seeded_sample_spread_over_the_split():
    from mtl.data.texts import LabelledTexts

    texts = LabelledTexts([[f"sentence {i}" for i in range(100)]], list(range(100)))
    drawn = texts.sample(10, seed=1234)
    assert drawn == texts.sample(10, seed=1234) and drawn != texts.sample(10, seed=1)
    assert len(drawn) == 10 and drawn.labels == sorted(drawn.labels)  # in the split's order
    assert drawn.labels != list(range(10)) and max(drawn.labels) >= 50  # not the first rows
    assert drawn.columns[0] == [f"sentence {i}" for i in drawn.labels]
    assert texts.sample(None, seed=1) is texts and texts.sample(500, seed=1) is texts


def test_long_sentences_are_cut_at_read_time_and_counted():
    texts = ["a dog runs .", " ".join(["word"] * 20_000), "x" * 100_000]
    table = SentenceTable(texts, Tokenizer(), max_tokens=6)
    assert [len(t) for t in table.tokens] == [4, 6, 1]
    assert table.truncated == 2  # the 20,000 words, and the one 100,000-character word
    assert table.tokens[0] == ["a", "dog", "runs", "."]


def test_a_datasets_tokens_are_read_back_by_the_next_process(monkeypatch):
    """A task's sentences (1,000 or more) are tokenized once per machine: the next training or
    transfer process (a sweep's member, a resume) reads them from the token cache; a short list
    (a query) is tokenized and not kept."""
    import mtl.data.batches as batches

    texts = [f"Sentence number {i} , said the U.S. man ." for i in range(batches.DISK_CACHED_TEXTS)]
    first = SentenceTable(texts, Tokenizer(), max_tokens=64)

    def never(self, texts):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(Tokenizer, "_tokenize_unique", never)
    again = SentenceTable(texts, Tokenizer(), max_tokens=64)
    assert again.tokens == first.tokens
    assert first.tokens[0] == ["sentence", "number", "0", ",", "said", "the", "u.s.", "man", "."]
    with pytest.raises(AssertionError, match="tokenized again"):
        SentenceTable(texts[:10], Tokenizer(), max_tokens=64)


def test_the_false_negative_share_counts_candidates_the_data_pairs_with_the_anchor():
    """Rows (anchor, positive, negative): an in-batch candidate is a false negative for an anchor
    when some row of the data has it as that anchor's positive; counted by hand on two batches."""
    from mtl.data.batches import false_negative_share

    rows = np.array(
        [
            [0, 10, 20],  # anchor 0's positives: 10 and 11 (its row below)
            [1, 11, 21],  # 11: a positive of anchor 0 elsewhere -> a false negative for row 0
            [2, 12, 10],  # its negative 10 is anchor 0's positive -> false for row 0
            [0, 11, 22],
        ]
    )
    # batch (0, 1, 2): row 0 sees 11, 21, 12, 10 -> 2 false; row 1 sees 10, 20, 12, 10 -> 0;
    # row 2 sees 10, 20, 11, 21 -> 0 (anchor 2's positive is 12 alone): 2 of 12
    assert false_negative_share(rows, [np.array([0, 1, 2])]) == pytest.approx(2 / 12)
    # batch (1, 3): row 1 sees 11, 22 -> 1 (11 is anchor 1's own positive, written again);
    # row 3 (anchor 0) sees 11, 21 -> 1: 2 of 4
    assert false_negative_share(rows, [np.array([1, 3])]) == pytest.approx(2 / 4)
    assert false_negative_share(rows, [np.array([0, 1, 2]), np.array([1, 3])]) == pytest.approx(4 / 16)
    assert false_negative_share(rows[:, :1], [np.array([0, 1])]) == 0.0  # no positives: nothing to count
