"""A pretrained transformers model as the shared encoder, fine-tuned as SBERT does (Reimers & Gurevych 2019).

Inputs are the model's own subword ids with its special tokens (`mtl.text.subwords`);
sentence embeddings pool its last hidden states over real tokens (mean by default).
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import torch
from torch import nn

from mtl.config import comma_list
from mtl.console import say
from mtl.errors import UserError
from mtl.files.atomic import safetensors_errors
from mtl.files.hub import load_pretrained
from mtl.models.card import CardFacts, write_card
from mtl.models.encoders.base import (
    Encoder,
    EncoderConfig,
    length_mask,
    register,
)
from mtl.models.encoders.config import HFOptions


class HFEncoder(Encoder):
    def __init__(self, config: EncoderConfig):
        super().__init__(None)
        options = config.options  # HFOptions: encoder=hf's own keys
        self.backbone = load_backbone(options.hf_model)
        if getattr(self.backbone, "pooler", None) is not None:
            # BERT's next-sentence pooler is not in the sentence embedding: parameters without a
            # gradient would stall DistributedDataParallel, and sentence-transformers drops it too.
            self.backbone.pooler = None
        self.pad_id = self.backbone.config.pad_token_id or 0
        self.width = self.backbone.config.hidden_size
        self.set_pooling(self.width, config.pooling)
        self.freeze(options.hf_freeze_embeddings, options.hf_freeze_layers)
        if options.gradient_checkpointing:
            enable_checkpointing(self.backbone)
        if options.lora_r:
            self.backbone = with_lora(self.backbone, options)
        if options.compile:
            # In place: the module and its state_dict keys stay as they are (checkpoints, exports,
            # resume); only its forward runs compiled. Dynamic shapes, as every batch's length differs.
            self.backbone.compile(dynamic=True)

    def freeze(self, embeddings: bool, layers: int) -> None:
        blocks = transformer_layers(self.backbone)
        if layers > len(blocks):
            raise UserError(f"hf_freeze_layers={layers}: the model has {len(blocks)} layers")
        frozen = [*blocks[:layers], *([self.backbone.get_input_embeddings()] if embeddings else [])]
        if embeddings and hasattr(self.backbone, "embeddings"):  # positions and their LayerNorm too
            frozen.append(self.backbone.embeddings)
        for module in frozen:
            module.requires_grad_(False)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if tokens.is_cuda and torch.backends.cuda.cudnn_sdp_enabled():
            avoid_cudnn_attention()
        mask = length_mask(lengths, tokens.shape[1], tokens.device)  # (B, T)
        states = self.backbone(
            input_ids=tokens.masked_fill(~mask, self.pad_id), attention_mask=mask.long()
        ).last_hidden_state  # (B, T, W)
        return self.pool_states(states, mask)


def avoid_cudnn_attention() -> None:
    """PyTorch's attention takes flash or memory-efficient kernels, not cuDNN's, in this process.

    For a padded batch in bf16 or fp16 on Hopper, PyTorch 2.11 picks cuDNN's attention first, and
    cuDNN builds an execution plan for every new (batch, length) it meets: on an H100, MiniLM-L6's
    bf16 step took 0.35-5.2 s on each new padded length against 41 ms on a length it had seen
    (fp32, which cuDNN's attention does not take: 37 ms), so bench-hf measured bf16 at 0.1x fp32's
    speed. The other kernels need no plan. Process-wide rather than a context around forward:
    the backward, and gradient checkpointing's recomputation, must take the kernel the forward took.
    """
    torch.backends.cuda.enable_cudnn_sdp(False)


def with_lora(backbone: nn.Module, config: HFOptions) -> nn.Module:
    """`backbone` frozen, with trainable LoRA adapters (Hu et al. 2021: W + (alpha / r) B A, B
    zero at first, so the model starts as it was) on the modules `lora_targets` names (peft's
    default for the architecture when empty: BERT's query and value, as Hu et al.)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise UserError(
            f"lora_r={config.lora_r} trains adapters with peft, which is not installed: "
            "pip install 'mtl[lora]' (or pip install peft)"
        ) from None
    targets = comma_list(config.lora_targets)
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=("all-linear" if targets == ["all-linear"] else targets) or None,
        bias="none",
    )
    try:
        with warnings.catch_warnings():  # peft asks transformers 5 by a name it deprecates
            warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
            return get_peft_model(backbone, lora)
    except ValueError as error:  # no module of those names, or an architecture peft has no default for
        raise UserError(f"lora_targets={config.lora_targets or '(peft default)'}: {error}") from None


def merged(backbone: nn.Module) -> nn.Module:
    """A plain transformers model of `backbone`: with LoRA adapters, a copy with them folded into
    its weights (what sentence-transformers loads without peft); else `backbone` itself."""
    if not hasattr(backbone, "merge_and_unload"):
        return backbone
    return copy.deepcopy(backbone).merge_and_unload()


def enable_checkpointing(backbone: nn.Module) -> None:
    """Recompute each layer's activations in backward (non-reentrant: dropout replays its masks,
    and frozen layers work), under the name this transformers version gives it."""
    kwargs = {"use_reentrant": False}
    if hasattr(backbone, "activation_checkpointing_enable"):  # transformers 5.x
        backbone.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def checkpointing(backbone: nn.Module) -> bool:
    """Whether `enable_checkpointing` is in effect."""
    if hasattr(type(backbone), "is_activation_checkpointing"):
        return bool(backbone.is_activation_checkpointing)
    return bool(backbone.is_gradient_checkpointing)


def load_backbone(name: str) -> nn.Module:
    """The model of `name` without transformers' load report, which flags the next-sentence pooler
    that mtl drops (its own exports have none: "pooler MISSING ... newly initialized" read as a
    broken model); any other weight missing from the checkpoint or left unused is said in one line."""
    from transformers import AutoModel  # seconds to import: only for encoder=hf
    from transformers.utils import logging as transformers_logging

    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        model, info = load_pretrained(
            # safetensors only: a pickled checkpoint (pytorch_model.bin) runs code when it is loaded
            AutoModel.from_pretrained,
            name,
            "model",
            output_loading_info=True,
            use_safetensors=True,
        )
    finally:
        transformers_logging.set_verbosity(verbosity)
    for kind in ("missing", "unexpected", "mismatched"):
        if keys := sorted(str(k) for k in info.get(f"{kind}_keys", ()) if not str(k).startswith("pooler.")):
            shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
            say(f"warning: hf_model={name}: {kind} weights {shown} (transformers' load report)")
    return model


def transformer_layers(backbone: nn.Module) -> nn.ModuleList:
    """The model's stack of layers (BERT's encoder.layer, DistilBERT's transformer.layer, ...)."""
    count = backbone.config.num_hidden_layers
    for module in backbone.modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return module
    raise UserError(f"cannot find the {count} layers of {type(backbone).__name__}: use hf_freeze_layers=0")


def save_sentence_transformer(
    encoder: HFEncoder, tokenizer, folder: Path, max_seq_length: int, card: CardFacts
) -> None:
    """The backbone and tokenizer in Hugging Face format, plus the files that let sentence-transformers
    load the folder with the same pooling."""
    backbone = merged(encoder.backbone)
    with safetensors_errors(folder / "model.safetensors"):
        backbone.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    # sentence-transformers concatenates cls, max, mean in this order, as `pool` does max+mean.
    pooling_config = {
        "word_embedding_dimension": encoder.width,
        "pooling_mode_cls_token": encoder.pooling == "cls",
        "pooling_mode_max_tokens": encoder.pooling in ("max", "max+mean"),
        "pooling_mode_mean_tokens": encoder.pooling in ("mean", "max+mean"),
    }
    (folder / "1_Pooling").mkdir(exist_ok=True)
    _write_json(folder / "1_Pooling" / "config.json", pooling_config)
    sentence_bert = {"max_seq_length": max_seq_length, "do_lower_case": False}
    if hasattr(backbone, "pooler"):  # BERT's: removed, so loading must not build a fresh one
        sentence_bert["model_args"] = {"add_pooling_layer": False}
    _write_json(folder / "sentence_bert_config.json", sentence_bert)
    _write_json(
        folder / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ],
    )
    write_card(folder, card, encoder.output_dim, ["Transformer", "Pooling"])


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


@register("hf")
def build(embedding: nn.Embedding | None, config: EncoderConfig) -> HFEncoder:
    return HFEncoder(config)
