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
