import subprocess
import sys

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

    texts = [f"Sentence {i}: the U.S. isn't {'big' * (i % 3)}!" for i in range(40)]
    texts += ["", "  ", "a\x1fb c", "x\x1ey", "Sentence 3: the U.S. isn't !"]  # the separators stay here
    tokenizer = module.make_tokenizer(name)
    monkeypatch.setattr(tokenizer, "parallel_texts", 10)  # the workers' path for a few texts
    assert tokenizer.tokenize(texts, processes=2) == tokenizer.tokenize(texts)


def test_a_second_tokenization_of_the_same_texts_reads_the_cache(tmp_path, monkeypatch):
    from mtl.text import token_cache

    monkeypatch.setenv("MTL_CACHE_DIR", str(tmp_path))
    texts = ["A man plays a guitar.", "Two dogs run.", "A man plays a guitar.", "U.S. troops"]
    first = token_cache.cached_tokenize(Tokenizer(), texts)
    assert first == Tokenizer().tokenize(texts)
    (entry,) = (tmp_path / "tokens").glob("*.json")

    def not_again(self, texts, processes=1):
        raise AssertionError("tokenized again")

    with monkeypatch.context() as patched:
        patched.setattr(Tokenizer, "tokenize", not_again)
        assert token_cache.cached_tokenize(Tokenizer(), texts) == first
    # Another tokenizer setting, or other texts, is another entry.
    assert token_cache.cached_tokenize(Tokenizer(lowercase=False), texts)[3] == ["U.S.", "troops"]
    token_cache.cached_tokenize(Tokenizer(), texts[:2])
    assert len(list((tmp_path / "tokens").glob("*.json"))) == 3
    # A damaged entry is said and tokenized again.
    entry.write_text('[["a"]', encoding="utf-8")
    with pytest.warns(UserWarning, match="token cache entry .* is damaged"):
        assert token_cache.cached_tokenize(Tokenizer(), texts) == first
    assert token_cache.cached_tokenize(Tokenizer(), texts) == first  # and written again


# Texts that reach each of NLTK's rules: quotes of every kind, clitics and contractions, final
# periods inside brackets and quotes, ellipses, dashes, symbols, brackets, and a multi-line text.
TREEBANK_CASES = [
    "\"Hello,\" she said. 'Tis the season -- isn't it?",
    "“Curly” and ‘single’ quotes, «chevrons» and „low” ones; ``backticks'' too.",
    "I cannot believe you're gonna wanna gimme more'n that, d'ye? Lemme go, I've gotta.",
    "Prices rose 3.5% ($4.20) on 12/03... then fell—sharply—to #2 @ noon & more.",
    "He said 'no'. (Really.) [Yes!] {Maybe?} <tag> end.\"",
    "O'Neil's rock 'n' roll y'all ain't TWAS 'twas WON'T we'll they'd.",
    "  Two\tlines\nof text:   spaced,  out  ",
    "a.b.c. U.S.A. e.g. Mr. Smith's 1990s-era well-known co-op...",
]


def test_treebank_tokenizer_gives_nltks_own_tokens():
    """mtl runs NLTK's patterns with Python's `re` (2.6x as fast as NLTK 3.10.4's timed `regex`):
    the tokens must stay NLTK's own, with and without lowercasing."""
    from nltk.tokenize import NLTKWordTokenizer

    from mtl.text.tokenizer import QUOTES, make_tokenizer

    nltk_own = NLTKWordTokenizer()
    for lowercase in (True, False):
        tokenizer = make_tokenizer("treebank", lowercase)
        for text in TREEBANK_CASES:
            expected = nltk_own.tokenize(text.lower() if lowercase else text)
            assert tokenizer(text) == [QUOTES.get(token, token) for token in expected], text


def test_a_tokenizer_imports_its_library_only_to_tokenize():
    """A build whose tokens all come from the cache imports neither spaCy (and torch with it) nor
    NLTK: making a tokenizer and naming it (the cache key) must not."""
    code = (
        "import sys; from mtl.text.tokenizer import make_tokenizer\n"
        "for name in ('spacy', 'treebank', 'whitespace'): make_tokenizer(name).description\n"
        "print(sorted(m for m in ('spacy', 'nltk', 'torch') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
