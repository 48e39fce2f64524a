"""`just push-encoder run=R repo=ORG/NAME`: a run's sentence-transformers folder and its card,
uploaded to the Hugging Face Hub as a model repository.

What goes up is the run's `encoder/` folder as training wrote it (safetensors and JSON, nothing
that runs code), with its card written again: the run's transfer reports (each score with the
protocol that made it, also in `model-index`), `base_model=` when the run fine-tuned a local
copy of a Hub model, the license, and the loading example set for the repository. The token is
huggingface_hub's own: `hf auth login` or HF_TOKEN, never a key on the command line.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mtl.config import apply_overrides
from mtl.errors import UserError

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import PushConfig as PushConfig
from mtl.eval.export_encoder import run_card
from mtl.eval.loading import encoder_file, load_encoder, read_encoder_file
from mtl.eval.transfer.classifiers import Protocol
from mtl.files.hub import looks_like_hub_id
from mtl.formats.transfer_report import read_report, report_paths
from mtl.models.card import card_text
from mtl.runs import RunFolder, read_summary
from mtl.transfer_tasks.registry import headline_metrics, ordered


def push_encoder(config: PushConfig) -> str:
    """Upload the run's folder; returns the commit's URL."""
    if not config.run or not config.repo:
        raise UserError("push-encoder needs run=<run folder> and repo=<organization>/<name>")
    if config.repo.count("/") != 1 or not all(config.repo.split("/")):
        raise UserError(f"repo={config.repo!r}: give the Hub repository as organization/name")
    run = RunFolder(Path(config.run))
    folder = run.pretrained_encoder
    if not (folder / "modules.json").is_file():
        why = (read_summary(run.summary) or {}).get("sentence_transformers")
        reason = f": {why}" if isinstance(why, str) and why != "encoder" else ""
        raise UserError(
            f"{run.path} has no sentence-transformers folder ({folder}){reason}; only a finished run "
            "whose encoder sentence-transformers can compute has one"
        )
    from huggingface_hub import HfApi  # a second to import: only when uploading

    api = HfApi(endpoint=config.endpoint)
    with tempfile.TemporaryDirectory(prefix="mtl-push-") as staging:
        upload = Path(staging) / "encoder"
        shutil.copytree(folder, upload)
        (upload / "README.md").write_text(card_with_transfer(run.path, config.base_model), encoding="utf-8")
        _set_card(upload / "README.md", config, run.path.name)
        try:
            api.create_repo(config.repo, private=config.private, exist_ok=True)
            commit = api.upload_folder(
                folder_path=upload,
                repo_id=config.repo,
                commit_message=config.message or f"mtl run {run.path.name}",
            )
        except Exception as error:  # network, auth, offline mode: all say the same to the user
            raise UserError(
                f"could not upload to the Hugging Face Hub at {api.endpoint} ({type(error).__name__}: "
                f"{_first_line(error)}): check the network, and log in with `hf auth login` or set HF_TOKEN"
            ) from None
    return str(getattr(commit, "commit_url", commit))


def card_with_transfer(run: Path, base_model: str = "") -> str:
    """The run's card, with its transfer reports and the base model named."""
    if base_model and not looks_like_hub_id(base_model):
        raise UserError(f"base_model={base_model!r}: give the Hub id of the model, as ORG/NAME")
    file = encoder_file(run)
    facts = run_card(run.name, read_encoder_file(file), file)
    facts.transfer = transfer_rows(run)
    if base_model:
        facts.base_model = base_model
    encoder = load_encoder(run, device="cpu")
    modules = json.loads((RunFolder(run).pretrained_encoder / "modules.json").read_text(encoding="utf-8"))
    return card_text(facts, encoder.dim, [module["type"].rsplit(".", 1)[-1] for module in modules])


def transfer_rows(run: Path) -> list[tuple[str, str, str, str, float]]:
    """(report, protocol, task, metric, points) for every headline score of the run's transfer
    reports (MTEB's left to MTEB's own card)."""
    rows = []
    for path in report_paths(run):
        report = read_report(path, damaged_is_missing=True)
        if report is None or path.stem.startswith("transfer-mteb"):
            continue
        protocol = protocol_text(report)
        for task in ordered(report["results"]):
            result = report["results"][task]
            for metric in headline_metrics(task, result):
                if isinstance(result.get(metric), int | float):
                    rows.append((path.stem, protocol, task, metric, 100 * float(result[metric])))
    return rows


def protocol_text(report: dict) -> str:
    """How a report's scores were made, in a line: the classifier, folds and penalty grid."""
    mode = str(report.get("mode", "standard"))
    if mode.startswith("senteval"):
        classifier = report.get("classifier") or {}
        return (
            f"SentEval's PyTorch classifier ({mode}: {classifier.get('kfold', '?')}-fold, "
            f"optimizer {classifier.get('optim', '?')}, batch {classifier.get('batch_size', '?')})"
        )
    protocol = Protocol.named(mode)
    grid = ", ".join(f"{c:g}" for c in protocol.penalties)
    cv_grid = ", ".join(f"{c:g}" for c in protocol.train_test_penalties)
    return (
        f"{mode} protocol: scikit-learn logistic regression; MR, CR, SUBJ, MPQA by {protocol.folds}-fold "
        f"cross-validation, C from {{{grid}}} chosen by {protocol.inner_folds} inner folds; SST and SICK-E "
        f"with C chosen on dev; TREC and MRPC with C from {{{cv_grid}}} by cross-validation on train, then "
        "tested; SICK-R and STS-B by Tai et al.'s regression, STS12-16 by cosine (Pearson x 100)"
    )


def _set_card(path: Path, config: PushConfig, name: str) -> None:
    """The card as it reads on the Hub: the chosen license, and loading by the repository's id."""
    if not path.is_file():
        return
    from huggingface_hub import ModelCard

    card = ModelCard.load(path)
    if card.data.license != config.license:
        card.text = card.text.replace(f"License: {card.data.license} (that of SNLI and SQuAD, its training data).",
                                      f"License: {config.license}.")  # fmt: skip
        card.data.license = config.license
    card.text = card.text.replace(
        f'SentenceTransformer("runs/{name}/encoder")', f'SentenceTransformer("{config.repo}")'
    )
    card.save(path)


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else "no message"


def command(args: Sequence[str]) -> None:
    config = apply_overrides(PushConfig(), args)
    url = push_encoder(config)
    print(f"pushed {RunFolder(Path(config.run)).pretrained_encoder} to {config.repo}: {url}")
