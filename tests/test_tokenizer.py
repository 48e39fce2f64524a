from mtl.text import Tokenizer


def test_spacy_rules_then_lowercase():
    tokens = Tokenizer(lowercase=True)("The U.S. team won't lose, said Mr. O'Neil.")
    assert tokens == ["the", "u.s.", "team", "wo", "n't", "lose", ",", "said", "mr.", "o'neil", "."]


def test_case_kept_when_asked_and_whitespace_dropped():
    assert Tokenizer(lowercase=False)("  Two   Dogs\n run ") == ["Two", "Dogs", "run"]


def test_batch_keeps_order_and_duplicates():
    tokenizer = Tokenizer()
    texts = ["b c", "a", "b c", ""]
    assert tokenizer.tokenize(texts) == [["b", "c"], ["a"], ["b", "c"], []]
