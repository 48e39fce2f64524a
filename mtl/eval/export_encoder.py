"""`just export-encoder`: a run's encoder written for sharing, with a vocabulary of public words.

An encoder file names its vocabulary word by word. A run's own export keeps the words of the
training examples it trained on (`mtl.train.data.shared_words`), which for private training text
are private words. `vocabulary=public` keeps only the words of the public vectors file (and
padding and the unknown word): every other word then maps to the unknown vector, and nothing
of the private text is left in the files. The weights are the run's, unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mtl.config import apply_overrides, to_dict
from mtl.errors import UserError

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import ExportConfig as ExportConfig
from mtl.eval.encoder import PretrainedSentenceEncoder
from mtl.eval.loading import encoder_file, encoder_of, own_config, read_encoder_file
from mtl.files import atomic
from mtl.formats import encoder_file as exported
from mtl.formats.encoder_file import pruned_state
from mtl.formats.merge_record import parent_file
from mtl.models.card import CardFacts, facts_of
from mtl.models.encoders.concat import ConcatEncoder
from mtl.models.encoders.embedding import part_state
from mtl.models.sentence_transformers import unsupported, write_sentence_transformer
from mtl.runs import RunFolder, read_json, read_summary, upgraded
from mtl.tasks.kinds import title_of
from mtl.text.vectors import vector_store

# What an export writes in out=; a folder holding anything else is not an export.
EXPORT_ENTRIES = ("encoder.json", "encoder.safetensors", "encoder")


def export_encoder(config: ExportConfig) -> tuple[Path, int, int]:
    """Write the export; returns its folder, the words kept and the words left out."""
    if not config.run or not config.out:
        raise UserError("export-encoder needs run=<run folder or encoder file> and out=<new folder>")
    out = atomic.check_output_dir(Path(config.out), "out")
    target = RunFolder(out).encoder
    entries = [p.name for p in out.iterdir()] if out.is_dir() else []
    # (a killed export's temporary files, `.encoder.json.<pid>.partial`, are its own)
    if others := sorted(n for n in entries if n not in EXPORT_ENTRIES and not n.startswith(".encoder")):
        # An export replaces its own encoder/ folder whole: never a folder of the user's.
        raise UserError(
            f"out={out} holds files that are not an export ({', '.join(others[:3])}): choose a new folder"
        )
    if "encoder" in entries and not target.is_file():
        raise UserError(f"out={out} holds an encoder/ folder but no encoder.json: choose a new folder")
    if target.exists() and not config.overwrite:
        raise UserError(f"{target} exists: choose another out= or set overwrite=true")
    # every tensor and word checked on the way; the expansion map fitted on the run's own words
    file = encoder_file(config.run)
    saved = read_encoder_file(file)  # read once: the encoder and the metadata the export copies
    loaded = encoder_of(saved, file, config.run, device="cpu", vocab_expansion=config.vocab_expansion)
    if isinstance(loaded, PretrainedSentenceEncoder):
        raise UserError(
            f"{config.run} is a pretrained transformer: its subword vocabulary is the model's own"
        )
    vectors_file = Path(
        config.vectors or loaded.vectors or ""
    ).expanduser()  # what st_vocabulary=vectors reads
    if config.st_vocabulary == "vectors" and not vectors_file.is_file():
        raise UserError(
            f"st_vocabulary=vectors: the vectors file {config.vectors or loaded.vectors} is not here: "
            "give vectors=<the GloVe file the encoder was trained with>"
        )
    words = loaded.vocabulary.words
    rows = np.arange(len(words))
    if config.vocabulary == "public":
        vectors = config.vectors or loaded.vectors
        if not vectors or not Path(vectors).expanduser().is_file():
            raise UserError(
                f"vectors={vectors}: the public vectors file is not here; give vectors=<GloVe file> "
                "(the encoder's words are kept where it has a vector)"
            )
        public = vector_store(Path(vectors).expanduser()).index
        rows = np.array([0, 1] + [i for i, word in enumerate(words) if i > 1 and word in public])
    kept = [words[i] for i in rows]
    encoders = list(loaded.encoder.parts) if isinstance(loaded.encoder, ConcatEncoder) else [loaded.encoder]
    state = pruned_state(encoders[0].state_dict(), rows, len(words))
    paths = saved.get("embedding_parts") or []
    parts = {
        path: pruned_state(part_state(part, encoders[0].embedding), rows, len(words))
        for path, part in zip(paths, encoders[1:], strict=True)
    }
    own, prompts = own_config(saved, file)
    metadata = {
        "config": saved.get("config"),  # the training run's, for its card; loading reads encoder_config
        "encoder_config": to_dict(own),
        "prompts": prompts,
        "vocabulary": kept,
        "vectors": config.vectors or loaded.vectors,
        "embedding_parts": paths,
    }
    if isinstance(saved.get("merged"), dict):  # a merge's parents and method travel with it
        metadata["merged"] = moved_merge(saved["merged"], file.parent, out)
    expansion = None
    if loaded.expansion is not None:  # encode() of the export maps new words as the run's did
        metadata["vocab_expansion"] = {"words": loaded.expansion.words, "remapped": loaded.expansion_remapped}
        expansion = loaded.expansion.tensors()
    exported.write(target, metadata, state, parts, expansion=expansion)
    if len(encoders) == 1 and unsupported(encoders[0]) is None:
        lowercase = bool(loaded.tokenizer.lowercase) if loaded.tokenizer is not None else True
        st_words, st_rows = kept, [int(i) for i in rows]
        if loaded.expansion is not None or config.st_vocabulary == "vectors":
            # sentence-transformers looks words up, it cannot map them: every word of the vectors
            # file goes into its vocabulary with the vector encode() gives it (its GloVe vector;
            # with vocab_expansion, its mapped one: Skip-Thought's 930,911 words)
            loaded.vectors = str(vectors_file)
            before = len(loaded.vocabulary.words)
            loaded.expand_vocabulary(set(vector_store(vectors_file).words))
            st_words = kept + loaded.vocabulary.words[before:]
            st_rows += list(range(before, len(loaded.vocabulary.words)))
            encoders = [loaded.encoder]
        atomic.write_folder(
            RunFolder(out).pretrained_encoder,
            lambda folder: write_sentence_transformer(
                encoders[0],
                st_words,
                lowercase,
                folder,
                run_card(out.name, saved, file),
                st_rows,
                loaded.max_tokens,
            ),  # fmt: skip
            "sentence-transformers folder",
        )
    return out, len(kept), len(words) - len(kept)


def moved_merge(merged: dict, source: Path, out: Path) -> dict:
    """A merge record as the folder `out` reads it: its parents' relative paths (from the merge's
    own folder, `source`) made relative to `out`."""
    parents = [
        {**parent, "path": os.path.relpath(parent_file(source, str(parent["path"])).resolve(), out.resolve())}
        if isinstance(parent, dict) and isinstance(parent.get("path"), str)
        else parent
        for parent in merged.get("parents") or []
    ]
    return {**merged, "parents": parents}


def run_card(name: str, saved: dict, file: Path) -> CardFacts:
    """The card of an exported encoder: its run's config, and its run's best scores when the
    encoder file sits in the run folder beside summary.json."""
    try:
        config = upgraded(saved.get("config"), str(file))  # facts_of reads today's layout
    except UserError:
        config = {}  # a card without the run's settings rather than no export
    summary = read_summary(RunFolder(file.parent).summary)
    tasks = config.get("tasks", {}) if isinstance(config.get("tasks"), dict) else {}
    titles = {
        task: title_of(task, str(values.get("kind", task)), str(values.get("display", "")))
        for task, values in tasks.items()
        if isinstance(values, dict)
    }
    facts = facts_of(name, config, summary if isinstance(summary, dict) else {}, titles)
    if isinstance(merged := saved.get("merged"), dict):  # say what it is before its first parent's settings
        facts.settings.insert(0, merge_line(merged))
        for parent in merged.get("parents") or []:  # trained on every parent's data, not the first's only
            written = (
                read_json(parent_file(file.parent, str(parent.get("path"))))
                if isinstance(parent, dict)
                else None
            )
            if isinstance(written, dict):
                other = run_card(name, {"config": written.get("config")}, file)
                facts.datasets += [d for d in other.datasets if d not in facts.datasets]
                facts.titles = {**other.titles, **facts.titles}
    return facts


def merge_line(merged: dict) -> str:
    """The card's line on a merged encoder: method, lam and its parents' folders."""
    parents = [
        str(Path(str(p.get("path", ""))).parent.name)
        for p in merged.get("parents") or []
        if isinstance(p, dict)
    ]
    lam = merged.get("lam")
    setting = f", lam {lam:g}" if isinstance(lam, int | float) else ""
    return (
        f"merged by `just merge-encoders` ({merged.get('method')}{setting}) from {len(parents)} encoders "
        f"({', '.join(parents)}); the settings below are its first parent's"
    )


def command(args: Sequence[str]) -> None:
    """`just export-encoder run=... out=...`."""
    config = apply_overrides(ExportConfig(), args)
    out, kept, dropped = export_encoder(config)
    which = "words of the vectors file" if config.vocabulary == "public" else "words of the run's export"
    print(
        f"encoder written to {out} with {kept:,} {which} ({dropped:,} words left out map to the unknown vector)"
    )
