"""The ClassifSQuAD authors' own sampler, run the way their `run_preprocess.py` drives it, for
`just bench-build authors=PATH` to time beside mtl's build.

PATH is their `squad_preprocess/sample_dataset.py` (github.com/kolchinski/NLI_2018); it is not
part of mtl, and running the bench with it runs that file's code. As their driver does, this
reads the vectors file's words (the first field of every line, a plain text file), loads each
SQuAD JSON file whole, and calls `sample_squad_classif_dataset` on it, which tokenizes every
question and answer with NLTK and writes its triples as tab-separated lines.

Two things differ from their machine, both said in the bench's report: NLTK's `word_tokenize`
first splits sentences with the punkt model, which cannot be downloaded here; without it each
text is one sentence (as mtl tokenizes them). And with `engine=re` NLTK's word tokenizer runs
its patterns with Python's `re` (as NLTK did through 3.10.3, and mtl does), not with the timed
`regex` engine NLTK 3.10.4 brought.

Run as its own process: python -m tools.authors_sampler SAMPLER SQUAD VECTORS OUT ENGINE
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

from mtl.text.tokenizer import treebank_tokenizer

SPLIT_FILES = {"train": "train-v1.1.json", "dev": "dev-v1.1.json"}  # their driver's two calls
ENGINES = ("installed", "re")


def has_punkt() -> bool:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        return False
    return True


def main(sampler: str, squad: str, vectors: str, out: str, engine: str) -> None:
    import nltk
    import nltk.tokenize
    import numpy as np

    started = time.perf_counter()
    if engine == "re":
        nltk.tokenize._treebank_word_tokenizer = treebank_tokenizer()  # what word_tokenize calls
    punkt = has_punkt()
    if not punkt:
        word_tokenize = nltk.word_tokenize
        nltk.word_tokenize = lambda text: word_tokenize(text, preserve_line=True)
    np.random.seed(0)  # their sampler draws each pair's order from numpy's global generator
    spec = importlib.util.spec_from_file_location("sample_dataset", sampler)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    vocabulary = set()
    with open(vectors, encoding="utf-8") as lines:
        for line in lines.readlines():
            vocabulary.add(line.split()[0])
    for split, name in SPLIT_FILES.items():
        with open(Path(squad) / name, encoding="utf-8") as file:
            source = json.load(file)
        module.sample_squad_classif_dataset(
            gl_vocab=vocabulary, source_data=source, output_path=str(Path(out) / f"{split}.tsv")
        )
    print(json.dumps({"seconds": time.perf_counter() - started, "punkt": punkt}))


if __name__ == "__main__":
    main(*sys.argv[1:])
