import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from dataset_builders.classifsquad import BuildConfig, build, squad_texts
from mtl.data.squad import load_squad
from mtl.text.tokenizer import Tokenizer

FIXTURES = Path(__file__).parent / "fixtures"


def pytest_configure(config):
    # Tests never touch the user's cache, an exported vectors file, or W&B servers. One cache for
    # the whole run: xdist's workers inherit the one their controller made (every entry is written
    # whole, then renamed), so SQuAD's texts tokenized or GloVe converted by one worker's build or
    # training are read by the other's, as a user's next process reads them.
    if not is_xdist_worker(config):
        os.environ["MTL_CACHE_DIR"] = tempfile.mkdtemp(prefix="mtl-test-cache-")
    os.environ.pop("MTL_VECTORS", None)
    os.environ.pop("WANDB_API_KEY", None)
    os.environ["WANDB_MODE"] = "disabled"
    # Started in the background by a script (`pytest ... &`, nohup), pytest inherits SIGINT ignored,
    # and so would every process a test starts: a sweep the Ctrl-C test interrupts never heard it and
    # trained on after the suite. The tests' processes get a terminal's SIGINT, as under `just test`.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# The files that take longest, started first and longest first: `just test` hands whole files to
# its workers in collection order (`--no-loadscope-reorder`), and a long file handed out last runs
# while the other workers have nothing left. The README walk (about 5 minutes, its first 100 s one
# line after another on one core) ran last among xdist's own order (most tests first) and left a
# core idle for minutes. Seconds each took in a full run on 2 cores, 2026-11-29: 418, 152, 130, 77,
# 69, 69, 65, 58, 54, 53; every other file took under 45 s. Later files keep pytest's order.
LONGEST_FIRST = (
    "test_readme.py",
    "test_distributed.py",
    "test_slurm.py",
    "test_classifsquad_real.py",
    "test_objectives.py",
    "test_mixture.py",
    "test_compare_mixing.py",
    "test_decontaminate.py",
    "test_fsdp.py",
    "test_locks.py",
    "test_fuzz.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_unconfigure(config):
    if not is_xdist_worker(config):
        shutil.rmtree(os.environ["MTL_CACHE_DIR"], ignore_errors=True)


def is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


@pytest.fixture(autouse=True)
def plugins_named_by_a_command_stay_in_their_test(monkeypatch):
    """`main([... plugins=X])` sets MTL_PLUGINS for the processes a command starts; left set, every
    later test's subprocess would load X (a study plugin's torch broke the --help import checks
    whenever tests/test_plugins.py ran before tests/test_cli.py on one worker)."""
    from mtl import plugins

    given = os.environ.get(plugins.ENVIRONMENT)
    monkeypatch.setenv(plugins.ENVIRONMENT, given or "")  # recorded: restored (or unset) after the test
    if given is None:
        monkeypatch.delenv(plugins.ENVIRONMENT)


@pytest.fixture
def shared_data() -> Path:
    value = os.environ.get("MTL_DATA_DIR")
    if not value:
        pytest.skip("MTL_DATA_DIR is not set: point it at ../shared/data to run tests on the real datasets")
    # resolved: README's `MTL_DATA_DIR=../shared/data just test` is relative to the clone, and a
    # test that moves into its own folder (monkeypatch.chdir) must still find the data
    return Path(value).resolve()


@pytest.fixture
def seed() -> int:
    return 1234


class Killed(Exception):
    """Stands for `kill -9` between two steps: nothing more is saved."""


def start_run(tiny_data, out: Path, *extra: str, killed_after: int | None = None):
    """Train in `out` (run folder, summary); with `killed_after`, the process dies once that step is done."""
    from mtl.train.loop import run

    config = run.config_from_args(args_for(tiny_data, out, *extra))
    if killed_after is None:
        return run.start(config, progress=False)
    with pytest.raises(Killed):
        run.start(config, progress=False, callbacks=[killed_after_step(killed_after)])
    return Path(out), None


def straight_and_resumed(tiny_data, root: Path, *extra: str) -> tuple[Path, dict, dict]:
    """The same run trained straight through (in root/straight) and killed after step 7 then
    resumed (root/cut): the straight run's folder, its summary, and the resumed run's summary."""
    from mtl.train.loop import run

    straight_dir, straight = start_run(tiny_data, root / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, root / "cut", *extra, killed_after=7)
    _, resumed = run.resume(cut_dir, progress=False)
    return straight_dir, straight, resumed


def killed_after_step(step: int):
    """A callback (`run.start(..., callbacks=[...])`) that kills its run once `step` steps are done,
    with what the loop does after a step (evaluation, checkpoint) and before the next one trains."""
    from mtl.registry import Callback

    class KilledAfter(Callback):
        def on_step_begin(self, run, tasks):
            if run.state.global_step >= step:
                raise Killed(f"killed after step {step}")

    return KilledAfter()


def one_error_line(capsys) -> str:
    """The one `error:` line a command printed (a second one, or none, fails the test)."""
    lines = [line for line in re.split(r"[\r\n]", capsys.readouterr().err) if line.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def wait_until_training(metrics: Path, process, lines: int = 5) -> None:
    """Wait (at most 2 minutes) until `process` has logged more than `lines` records to `metrics`."""
    deadline = time.monotonic() + 120
    while not (metrics.is_file() and metrics.read_text().count("\n") > lines):
        assert time.monotonic() < deadline and process.poll() is None, f"training did not start: {metrics}"
        time.sleep(0.2)


def args_for(tiny_data, out: Path, *extra: str) -> list[str]:
    """Training arguments for a tiny, fast run on the fixtures; `extra` replaces a default it names."""
    given = {arg.partition("=")[0] for arg in extra}
    defaults = [
        f"snli={FIXTURES / 'snli_tiny'}",
        f"classifsquad={tiny_data['classifsquad']}",
        f"vectors={tiny_data['vectors']}",
        f"out={out}",
        "hidden=8",
        "head_hidden=16",
        "steps_nli=3",
        "steps_squad=2",
        "batch_nli=8",
        "batch_squad=4",
        "max_steps=10",
        "checkpoint_every=3",
        "wandb=disabled",
        "contamination=false",  # 0.3 s a run; tests/test_contamination.py turns it on
    ]
    if "encoder=transformer" in extra:  # (a key of another encoder is refused)
        defaults += ["transformer_heads=2", "transformer_ffn=16"]
    return [arg for arg in defaults if arg.partition("=")[0] not in given] + list(extra)


def long_sweep_args(tiny_data, out: Path) -> list[str]:
    """A two-member sweep whose members train until stopped: no stopping rule but max_steps (SGD's
    min_lr, decided at epoch ends, would end a member within a few hundred steps), no evaluation
    and no checkpoint until then."""
    args = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    args += [
        "steps_nli=2,3",
        "max_steps=100000",
        "checkpoint_every=100000",
        "eval_every=100000",
        "stop=max_steps",
    ]
    return [*args, "sweep=long", f"out={out}"]


def write_glove(path: Path, words, dim: int = 4, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    lines = [f"{word} {' '.join(f'{x:.5f}' for x in rng.normal(size=dim))}" for word in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """GloVe-format vectors for the fixture words, and a tiny ClassifSQuAD built from squad_tiny."""
    root = tmp_path_factory.mktemp("tiny-data")
    texts = [t for split in load_squad(str(FIXTURES / "squad_tiny")).values() for t in squad_texts(split)]
    for split in ("train", "dev", "test"):
        for prefix in ("s1", "s2"):
            texts += (FIXTURES / "snli_tiny" / f"{prefix}.{split}").read_text().splitlines()
    words = sorted({w for tokens in Tokenizer().tokenize(texts) for w in tokens})
    # Half the words lack a vector; "unused" has one but appears in no training sentence.
    vectors = write_glove(root / "tiny.8d.txt", words[::2] + ["unused"], dim=8)
    build(
        BuildConfig(
            squad=str(FIXTURES / "squad_tiny"),
            vectors=str(vectors),
            out=str(root / "classifsquad"),
            max_oov=100,
            max_negatives_per_question=4,
            wandb="disabled",
        )
    )
    return {"vectors": vectors, "classifsquad": root / "classifsquad"}


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A random 2-layer BERT (16-d) with a WordPiece tokenizer of a few hundred tokens, saved as a
    Hugging Face model folder: `encoder=hf` end to end in seconds."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    texts = []
    for split in ("train", "dev", "test"):
        for prefix in ("s1", "s2"):
            texts += (FIXTURES / "snli_tiny" / f"{prefix}.{split}").read_text().splitlines()
    words = sorted({w.lower() for tokens in Tokenizer().tokenize(texts) for w in tokens if w.isalpha()})
    characters = sorted({c for text in texts for c in text.lower() if not c.isspace()})
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters]
    vocabulary += [f"##{c}" for c in characters if c.isalpha()] + words[:300]
    vocabulary = list(dict.fromkeys(vocabulary))
    (folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocabulary),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,  # mtl's default max_seq_length
    )
    BertModel(config).save_pretrained(folder)
    return folder


@pytest.fixture
def senteval(tmp_path) -> Path:
    """MR and CR in SentEval's layout, cut from the SNLI fixture (labels by sentence parity)."""
    return senteval_folder(tmp_path)


def senteval_folder(parent: Path) -> Path:
    """`senteval`'s folder, written under `parent` (for fixtures of a wider scope)."""
    sentences = (FIXTURES / "snli_tiny" / "s1.train").read_text().splitlines()[:60]
    root = parent / "downstream"
    for task, pos, neg in (
        ("MR", "rt-polarity.pos", "rt-polarity.neg"),
        ("CR", "custrev.pos", "custrev.neg"),
    ):
        (root / task).mkdir(parents=True)
        (root / task / pos).write_text("\n".join(sentences[0::2]) + "\n", encoding="latin-1")
        (root / task / neg).write_text("\n".join(sentences[1::2]) + "\n", encoding="latin-1")
    return root


def deterministic_summary(summary: dict) -> dict:
    """A run's summary without what the clock decides (`train_seconds`, an online schedule's
    `mixing_seconds`) and the W&B artifact names (its folder and run id): what a resume must equal."""
    clocked = ("train_seconds", "mixing_seconds", "wandb_artifacts")
    return {key: value for key, value in summary.items() if key not in clocked}


def exported_weights(run_dir: Path) -> dict:
    """The shared encoder's weights a run exported (encoder.safetensors), by parameter name."""
    from safetensors.torch import load_file

    tensors = load_file(Path(run_dir) / "encoder.safetensors")
    return {k.removeprefix("encoder/"): v for k, v in tensors.items() if k.startswith("encoder/")}


def exported_encoder(run_dir: Path) -> dict:
    """The exported encoder as load_encoder reads it: config, vocabulary, `encoder`, `parts`."""
    from mtl.formats import encoder_file

    return encoder_file.read(Path(run_dir) / "encoder.json")


def train_cli(tiny_data, out, *extra) -> int:
    """`just train-multitask` with the tiny run's arguments; its exit code."""
    from mtl.cli import main

    return main(["train-multitask", *args_for(tiny_data, out, *extra)])


def copy_classifsquad(tiny_data, tmp_path) -> Path:
    folder = tmp_path / "classifsquad"
    shutil.copytree(tiny_data["classifsquad"], folder)
    return folder


@pytest.fixture(scope="session")
def sweep_dir(tiny_data, tmp_path_factory):
    """`just sweep fig2` at toy size: the named sweep's file, then tiny overrides, W&B offline."""
    out = tmp_path_factory.mktemp("sweep") / "tiny"
    args = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "wandb="))]
    args += ["steps_nli=2,4", "steps_squad=2", "wandb=offline", "sweep=tiny", f"out={out}"]
    from mtl.cli import main

    assert main(["sweep", "fig2", *args]) == 0
    return out, args
