"""The files that make a folder a sentence-transformers model besides its weights: the similarity
config and a model card naming the run (for the GloVe export and a fine-tuned encoder=hf alike)."""

from __future__ import annotations

import json
from pathlib import Path

import torch


def write_card(folder: Path, name: str, dim: int, modules: list[str]) -> None:
    """`name`: the run, whose `encoder/` folder this is."""
    """`config_sentence_transformers.json` (cosine similarity) and a model card naming the run."""
    _json(folder / "config_sentence_transformers.json", {
        "__version__": {"pytorch": torch.__version__.split("+")[0]},
        "prompts": {},
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    })  # fmt: skip
    (folder / "README.md").write_text(
        "---\nlibrary_name: sentence-transformers\npipeline_tag: sentence-similarity\ntags:\n"
        "- sentence-transformers\n- feature-extraction\n- mtl\n---\n\n"
        f"# {name}\n\nA sentence encoder trained with [mtl](https://github.com/) (multitask NLI + "
        f"ClassifSQuAD, Liu et al. 2018). It maps a sentence to a {dim}-dimensional vector.\n\n"
        f"Modules: {' → '.join(modules)}.\n\n"
        "```python\nfrom sentence_transformers import SentenceTransformer\n\n"
        f'model = SentenceTransformer("runs/{name}/encoder")\n'
        'embeddings = model.encode(["a man is playing a guitar ."])\n```\n\n'
        + (
            "Give it text tokenized as the encoder was trained (tokens separated by spaces): words are "
            "split on whitespace only. Words outside the exported vocabulary are dropped, where mtl's "
            "`load_encoder` looks them up in the vectors file first.\n"
            if "WordEmbeddings" in modules
            else ""
        ),
        encoding="utf-8",
    )


def _json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
