"""`just bench-build authors=PATH`: the authors' sampler run as their driver runs it, beside mtl."""

import zipfile

import pytest

from mtl.data.squad import load_squad
from mtl.errors import UserError
from tools import build

from .conftest import FIXTURES, write_glove

# A stand-in for their squad_preprocess/sample_dataset.py: the same entry point, one line per
# question holding NLTK's tokens of it (through nltk.word_tokenize, as theirs) and the vocabulary size.
STAND_IN = """
import nltk

def sample_squad_classif_dataset(gl_vocab, source_data, output_path, start_ratio=0.0, stop_ratio=1.0):
    with open(output_path, "w") as f:
        for article in source_data["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    f.write("{}\\t{}\\n".format(len(gl_vocab), " ".join(nltk.word_tokenize(qa["question"]))))
"""


def test_the_authors_sampler_runs_on_the_builds_inputs(tmp_path):
    sampler = tmp_path / "sample_dataset.py"
    sampler.write_text(STAND_IN)
    vectors = write_glove(tmp_path / "tiny.txt", ["what", "is", "the"])
    with zipfile.ZipFile(tmp_path / "tiny.zip", "w") as archive:
        archive.write(vectors, "tiny.txt")
    config = build.BenchBuildConfig(
        squad=str(FIXTURES / "squad_tiny"), vectors=str(tmp_path / "tiny.zip"), authors=str(sampler)
    )
    squad, text_vectors = build._authors_inputs(config, tmp_path / "scratch")  # the zip unpacked once
    assert text_vectors.read_text() == vectors.read_text()

    seconds, sampler = build._authors_once(config, squad, text_vectors, "re")
    questions = {
        split: sum(len(p.questions) for article in articles for p in article.paragraphs)
        for split, articles in load_squad(str(FIXTURES / "squad_tiny")).items()
    }
    assert seconds > 0 and list(sampler["lines"].values()) == list(questions.values())
    times = {"cold": [2.0], "warm": [1.0], "authors-installed": [8.0], "authors-re": [4.0]}
    report = build.report(times, config, sampler)
    assert "against the authors' sampler (re): mtl cold 2.00x, warm 4.00x as fast" in report
    assert f"wrote {questions['train']:,} / {questions['validation']:,} train / dev triples" in report


def test_authors_must_be_their_sampler_file(tmp_path):
    with pytest.raises(UserError, match=r"authors=.* is not a file: give the path of the authors'"):
        build.run(build.BenchBuildConfig(authors=str(tmp_path / "missing.py")))
