import pytest

from mtl.text.tokenizer import Tokenizer


def test_spacy_rules_then_lowercase():
    tokens = Tokenizer(lowercase=True)("The U.S. team won't lose, said Mr. O'Neil.")
    assert tokens == ["the", "u.s.", "team", "wo", "n't", "lose", ",", "said", "mr.", "o'neil", "."]


def test_case_kept_when_asked_and_whitespace_dropped():
    assert Tokenizer(lowercase=False)("  Two   Dogs\n run ") == ["Two", "Dogs", "run"]


def test_batch_keeps_order_and_duplicates():
    tokenizer = Tokenizer()
    texts = ["b c", "a", "b c", ""]
    assert tokenizer.tokenize(texts) == [["b", "c"], ["a"], ["b", "c"], []]


def test_treebank_tokenizer_follows_the_authors_conventions():
    from mtl.text.tokenizer import make_tokenizer

    tokenizer = make_tokenizer("treebank")
    assert tokenizer('The "well-known" case: don\'t Split!') == [
        "the",
        '"',
        "well-known",
        '"',
        "case",
        ":",
        "do",
        "n't",
        "split",
        "!",
    ]
    assert tokenizer.description["lowercase"] is True


@pytest.mark.parametrize("name", ["spacy", "treebank"])
def test_worker_processes_give_the_same_tokens_in_the_same_order(monkeypatch, name):
    from mtl.text import tokenizer as module

    monkeypatch.setattr(module, "PARALLEL_TEXTS", 10)  # the workers' path for a few texts
    texts = [f"Sentence {i}: the U.S. isn't {'big' * (i % 3)}!" for i in range(40)]
    texts += ["", "  ", "a\x1fb c", "x\x1ey", "Sentence 3: the U.S. isn't !"]  # the separators stay here
    tokenizer = module.make_tokenizer(name)
    assert tokenizer.tokenize(texts, processes=2) == tokenizer.tokenize(texts)
