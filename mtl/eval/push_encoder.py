"""`just push-encoder run=R repo=ORG/NAME`: a run's sentence-transformers folder and its card,
uploaded to the Hugging Face Hub as a model repository.

What goes up is the run's `encoder/` folder as training wrote it (safetensors and JSON, nothing
that runs code), with the card's license and its loading example set for the repository. The
token is huggingface_hub's own: `hf auth login` or HF_TOKEN, never a key on the command line.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.models.card import DEFAULT_LICENSE
from mtl.runs import RunFolder, read_summary


@dataclass
class PushConfig:
    run: str = ""  # the run folder whose encoder/ goes up
    repo: str = ""  # the Hub repository, ORG/NAME (made when it does not exist)
    private: bool = False  # a new repository is private
    license: str = DEFAULT_LICENSE  # the card's license (the default: that of SNLI and SQuAD)
    endpoint: str | None = None  # another Hub (a private mirror); None: huggingface.co or HF_ENDPOINT
    message: str = ""  # the commit message; empty: "mtl run <run>"


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
