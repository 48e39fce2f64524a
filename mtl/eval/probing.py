"""`just probing`: the probing tasks (Conneau et al. 2018; SentEval's probing.py) for an encoder.

`data=PATH` scores SentEval's probing sets found in PATH (all ten where present);
`generate=sentence_length,word_content,bigram_shift` first writes the three surface tasks,
generated from a corpus of sentences (`corpus=FILE`, a sentence a line; default: the shared
SNLI sentences and SQuAD questions), into `<out>/probing-generated/`, labelled as generated
(`GenLength`, ...), then scores them. Either way it is `just transfer` on those tasks with
SentEval's probing protocol (its split classifier: the penalty chosen on dev; an MLP of 50
sigmoid units, the classifier the paper probes with; word content stays linear, as SentEval's
code keeps it), and the results join the transfer report of that protocol.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from mtl.config import apply_overrides
from mtl.data.squad import load_squad, resolve_squad_source
from mtl.errors import UserError

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import ProbingConfig as ProbingConfig
from mtl.eval.transfer import suite
from mtl.files.atomic import write_text
from mtl.files.paths import data_dir
from mtl.runs import RunFolder
from mtl.text.unicode import decode_utf8, text_lines
from mtl.transfer_tasks.probing_tasks import GENERATED, SENTEVAL_FILES, generate, probing_file


def corpus_sentences(config: ProbingConfig) -> list[str]:
    if config.corpus:
        path = Path(config.corpus).expanduser()
        if not path.is_file():
            raise UserError(f"corpus={config.corpus}: no such file; give a text file, a sentence a line")
        lines = text_lines(decode_utf8(path.read_bytes(), "corpus", path))
    else:
        root = data_dir()
        if root is None:
            raise UserError(
                "generate= without corpus= reads the shared SNLI and SQuAD: set MTL_DATA_DIR or give corpus=FILE"
            )
        snli = root / "snli"
        lines = [
            line
            for file in sorted(snli.glob("s[12].*"))
            for line in file.read_text(encoding="utf-8").splitlines()
        ]
        squad = load_squad(resolve_squad_source(None))
        lines += [
            q.text for articles in squad.values() for a in articles for p in a.paragraphs for q in p.questions
        ]
    return list(dict.fromkeys(line.strip() for line in lines if line.strip()))[: config.max_sentences]


def generated_folder(config: ProbingConfig) -> Path:
    base = (
        Path(config.out).expanduser()
        if config.out
        else Path(config.run or f"runs/baseline-{config.baseline}")
    )
    if config.run and not config.out and not RunFolder(base).path.is_dir():
        base = Path(config.run).expanduser().parent  # a checkpoint file: beside its run
    return base / "probing-generated"


def write_generated(config: ProbingConfig) -> tuple[Path, list[str]]:
    """The generated tasks' files (and generated.json, how they were made); their task names."""
    sentences = corpus_sentences(config)
    folder = generated_folder(config)
    counts = {}
    for task in config.generated:
        name, file = GENERATED[task]
        lines = generate(task, sentences, config.seed)
        write_text(folder / file, "\n".join(lines) + "\n", "probing file")
        counts[name] = len(lines)
    how = {
        "corpus": config.corpus or "shared SNLI sentences and SQuAD questions",
        "sentences": len(sentences),
    }
    write_text(
        folder / "generated.json",
        json.dumps({**how, "seed": config.seed, "examples": counts}, indent=2) + "\n",
    )
    return folder, [GENERATED[task][0] for task in config.generated]


def found_tasks(folder: Path) -> list[str]:
    """SentEval's probing tasks whose files `folder` holds (or its sibling probing/)."""
    found = []
    for name, file in SENTEVAL_FILES.items():
        try:
            probing_file(folder, file)
            found.append(name)
        except UserError:
            continue
    if not found:
        raise UserError(
            f"data={folder} holds none of SentEval's probing files ({', '.join(SENTEVAL_FILES.values())})"
        )
    return found


def transfer_config(config: ProbingConfig, folder: Path, tasks: list[str]) -> suite.TransferConfig:
    senteval = config.mode.startswith("senteval")
    return suite.TransferConfig(
        run=config.run,
        baseline=config.baseline,
        tasks=",".join(tasks),
        mode=config.mode,
        data=str(folder),
        out=config.out,
        device=config.device,
        wandb=config.wandb,
        **({"classifier": config.classifier, "nhid": config.nhid} if senteval else {}),
    )


def command(args: Sequence[str]) -> None:
    config = apply_overrides(ProbingConfig(), args)
    config.check()
    if config.generate:
        folder, tasks = write_generated(config)
        print(f"generated {', '.join(tasks)} in {folder} (not SentEval's sets)")
    else:
        folder = Path(config.data).expanduser()
        tasks = found_tasks(folder)
    out, report = suite.run(transfer_config(config, folder, tasks))
    scores = ", ".join(f"{task} {100 * report['results'][task]['acc']:.2f}" for task in tasks)
    protocol = f"{config.mode}, {config.classifier}" if config.mode.startswith("senteval") else config.mode
    print(f"probing ({protocol}): {scores}; reports in {out}")
