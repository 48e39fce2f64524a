"""The keys of the shared encoder (`encoder=`, `hidden=`, `pooling=`, ...), the registry of encoder
names and each encoder's traits: what reading and checking a configuration needs, without torch.

mtl's own encoders are listed here with their traits and the module that builds them; that
module (and torch) is imported when a run first builds one. A plugin's encoder registers its
builder and traits together (`register("mine", EncoderTraits(...))`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from mtl.config import (
    AtLeast0,
    AtLeast1,
    OneOf,
    Range,
    check_fields,
    key_owners_of,
    options_field,
    settle_options,
)
from mtl.errors import UserError
from mtl.plugins import Registry, adds_to

MAX_POSITIONS = 1024  # encoder=transformer's sinusoidal positions: the longest sentence it reads

Pooling = Literal["max", "mean", "max+mean", "sum", "selfattn", "cls", "last"]
WordEmbeddings = Literal["frozen", "trainable", "both"]


@dataclass
class EncoderConfig:
    encoder: Annotated[str, OneOf(ENCODERS)] = (
        "bilstm"  # the shared encoder (a registered name); hf: a pretrained transformers model (hf_model=)
    )
    embeddings: WordEmbeddings = (
        "frozen"  # word vectors: frozen; trainable (embedding_lr=); both (MC-QT: frozen + trained copy)
    )
    hidden: AtLeast1 = 2048  # per direction (BiLSTMs, LSTM, GRU), model width (transformer, decomposable)
    pooling: Literal["auto", "max", "mean", "max+mean", "sum", "selfattn", "cls", "last"] = (
        "auto"  # over real positions; auto: mean for encoder=hf, else max; cls: hf only; last: RNNs' final state;
        # selfattn: Lin et al. (2017) structured self-attention, selfattn_r views of the states
    )
    selfattn_da: AtLeast1 = 128  # pooling=selfattn: width of the attention's hidden layer (Liu et al.: 128)
    selfattn_r: AtLeast1 = (
        3  # pooling=selfattn: attention views, each a weighted sum of the states (Liu et al.: 3)
    )
    bottleneck: AtLeast0 = 0  # a linear layer from the pooled embedding to this many dimensions; 0: none
    encoder_dropout: Annotated[float, Range(0, 1, high_open=True)] = (
        0.0  # inside the encoder (not hf: its own)
    )
    # The chosen encoder's own keys, when it registered a class of them (EncoderTraits.options): a
    # plugin's `cnn_kernel=5`, read by its builder as `config.options.cnn_kernel`.
    options: Any = options_field("encoder", lambda: encoder_options())

    def __post_init__(self) -> None:
        settle_options(self)  # the chosen encoder's own keys, checked with the others
        check_fields(self)  # before the rule below divides by transformer_heads
        if isinstance(self.options, TransformerOptions) and self.hidden % self.options.transformer_heads:
            raise UserError(
                f"transformer_heads={self.options.transformer_heads} must divide hidden={self.hidden} (the model width)"
            )
        if self.pooling == "cls" and not traits(self.encoder).pretrained:
            raise UserError(
                f"pooling=cls needs encoder=hf ({self.encoder} has no [CLS] token): use max or mean"
            )
        if self.embeddings != "frozen" and traits(self.encoder).subwords:
            raise UserError(
                f"embeddings={self.embeddings} trains word vectors: encoder={self.encoder} has none (its own "
                "embedding layer trains unless hf_freeze_embeddings=true)"
            )
        own = traits(self.encoder).own_pooling
        if own and self.pooling not in ("auto", "max"):
            raise UserError(
                f"pooling={self.pooling} does not apply to encoder={self.encoder}: its pooling is part of the "
                f"architecture ({own}); leave pooling=auto"
            )
        if traits(self.encoder).pretrained and self.pooling in ("sum", "selfattn"):
            raise UserError(
                f"pooling={self.pooling} is not exported to encoder=hf's sentence-transformers folder: "
                "use mean, max, max+mean or cls"
            )
        if self.bottleneck and (traits(self.encoder).compares_tokens or traits(self.encoder).pretrained):
            raise UserError(
                f"bottleneck={self.bottleneck} needs a Siamese word-vector encoder: encoder={self.encoder} "
                + (
                    "compares token states, so the bottleneck would never be trained"
                    if traits(self.encoder).compares_tokens
                    else "exports its backbone without it"
                )
            )
        if self.pooling == "last" and not traits(self.encoder).recurrent:
            raise UserError(
                f"pooling=last needs a recurrent encoder (gru, lstm, bilstm; {self.encoder} has no final "
                "state): use max or mean"
            )

    def resolved(self) -> EncoderConfig:
        """A copy with `pooling=auto` made concrete for this encoder."""
        if self.pooling != "auto":
            return self
        return dataclasses.replace(self, pooling=traits(self.encoder).default_pooling)


# The keys of one encoder each (EncoderTraits.options): `config.options` to its builder, recorded as
# model.options; before they were theirs (config.json of older runs) they were fields of every encoder.


@dataclass
class GRUOptions:
    bidirectional: bool = False  # encoder=gru: also right to left (BiGRU)
    gru_init: Literal["pytorch", "quickthoughts"] = (
        "pytorch"  # encoder=gru: quickthoughts: Xavier-uniform weights, gate biases 1 (Quick-Thoughts 4.3)
    )


@dataclass
class GatedConvOptions:
    gatedconv_layers: AtLeast1 = 4  # encoder=gatedconv: gated convolutional layers (width 3, residual)


@dataclass
class TransformerOptions:
    transformer_layers: AtLeast1 = 4  # encoder=transformer: layers
    transformer_heads: AtLeast1 = 4  # encoder=transformer: attention heads (divide hidden)
    transformer_ffn: AtLeast1 = 1024  # encoder=transformer: feed-forward width


@dataclass
class HFOptions:
    hf_model: str | None = None  # encoder=hf: Hub id or local folder (AutoModel + AutoTokenizer)
    max_seq_length: AtLeast1 = (
        128  # encoder=hf: subword tokens per sentence, special ones included; cut beyond
    )
    hf_freeze_embeddings: bool = False  # encoder=hf: keep the pretrained embedding layer fixed
    hf_freeze_layers: AtLeast0 = 0  # encoder=hf: keep the first N transformer layers fixed
    gradient_checkpointing: bool = (
        False  # encoder=hf: recompute activations in backward (Chen et al. 2016): less memory
    )
    lora_r: AtLeast0 = 0  # encoder=hf: train rank-r LoRA adapters (Hu et al. 2021, via peft), the backbone frozen; 0: all of it
    lora_alpha: Annotated[float, Range(0, low_open=True)] = 16.0  # lora_r: the adapters' scale (alpha / r)
    lora_dropout: Annotated[float, Range(0, 1, high_open=True)] = (
        0.0  # lora_r: dropout on the adapters' input
    )
    lora_targets: str = ""  # lora_r: modules to adapt (query,value or all-linear); empty: peft's for the model (BERT: query,value)
    compile: bool = False  # encoder=hf: torch.compile the transformer for training (dynamic shapes; the first step compiles)

    def __post_init__(self) -> None:
        if self.lora_r and (self.hf_freeze_layers or self.hf_freeze_embeddings):
            raise UserError(
                f"lora_r={self.lora_r} keeps every pretrained weight fixed and trains adapters: leave out "
                "hf_freeze_layers= and hf_freeze_embeddings="
            )


@dataclass(frozen=True)
class EncoderTraits:
    """What the code around an encoder needs to know of it, declared where it is registered."""

    subwords: bool = False  # reads its own model's subword ids (no word vectors, no vocabulary)
    recurrent: bool = False  # an RNN: cuDNN runs its fp32 on TF32, and the CPU has no fp16 kernel
    pretrained: bool = False  # a pretrained backbone: SBERT's AdamW recipe, and exported in HF format
    default_pooling: Pooling = "max"  # what pooling=auto means
    own_pooling: str = ""  # the architecture pools its own way (inner attention, per-layer max): no pooling=
    shardable: bool = (
        False  # strategy=fsdp can shard its layers over the processes (a pretrained transformer)
    )
    max_positions: int | None = None  # the longest sentence (tokens) it reads: max_tokens= at most this
    # Compares the two sentences' tokens with each other (decomposable attention): a pair's label is
    # read from the comparison, so a single-sentence vector (bottleneck=) would never be trained
    compares_tokens: bool = False
    # A dataclass of keys of its own (a plugin's encoder: `cnn_kernel: AtLeast1 = 3`): given flat
    # on the command line, checked like any key, recorded in config.json, `config.options` to its builder.
    options: type | None = None


# name -> (the module whose import registers its builder, its traits)
BUILTIN: dict[str, tuple[str, EncoderTraits]] = {
    "bilstm": ("mtl.models.encoders.bilstm", EncoderTraits(recurrent=True)),
    "bilstm2": ("mtl.models.encoders.bilstm2", EncoderTraits(recurrent=True)),
    "bow": ("mtl.models.encoders.bow", EncoderTraits(default_pooling="mean")),
    "decomposable": ("mtl.models.encoders.decomposable", EncoderTraits(compares_tokens=True)),
    "gatedconv": ("mtl.models.encoders.gatedconv", EncoderTraits(options=GatedConvOptions)),
    "gru": ("mtl.models.encoders.gru", EncoderTraits(recurrent=True, options=GRUOptions)),
    "hconvnet": ("mtl.models.encoders.hconvnet", EncoderTraits(own_pooling="max over each layer")),
    "hf": (
        "mtl.models.encoders.hf",
        EncoderTraits(
            subwords=True, pretrained=True, default_pooling="mean", shardable=True, options=HFOptions
        ),
    ),
    "innerattention": (
        "mtl.models.encoders.innerattention",
        EncoderTraits(recurrent=True, own_pooling="4 attention views"),
    ),
    "lstm": ("mtl.models.encoders.lstm", EncoderTraits(recurrent=True)),
    "transformer": (
        "mtl.models.encoders.transformer",
        EncoderTraits(max_positions=MAX_POSITIONS, options=TransformerOptions),
    ),
}

# name -> builder(embedding, config) -> Encoder (see base.EncoderBuilder)
ENCODERS: Registry[Callable[..., Any]] = Registry({name: module for name, (module, _) in BUILTIN.items()})
TRAITS: dict[str, EncoderTraits] = {name: declared for name, (_, declared) in BUILTIN.items()}


def register(
    name: str, declared: EncoderTraits | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Enter an encoder's builder under `name`, with its traits (a built-in one's are in BUILTIN)."""

    if declared is not None and declared.options is not None:
        _check_options(name, declared.options)

    def add(builder: Callable[..., Any]) -> Callable[..., Any]:
        adds_to(ENCODERS, name)(builder)  # a name taken by another encoder is refused
        TRAITS[name] = declared if declared is not None else TRAITS.get(name, EncoderTraits())
        return builder

    return add


def key_owners() -> dict[str, list[str]]:
    """Each encoder-specific key -> the encoders that take it (their options)."""
    return key_owners_of(encoder_options())


def encoder_options() -> dict[str, type]:
    """Each encoder with keys of its own -> the dataclass of them."""
    return {name: declared.options for name, declared in TRAITS.items() if declared.options}


def _check_options(name: str, options_class: type) -> None:
    """An encoder's own keys are dataclass fields, none of them a key every encoder has."""
    if not dataclasses.is_dataclass(options_class):
        raise TypeError(f"encoder {name!r}: EncoderTraits(options=) takes a dataclass of its keys")
    shared = {field.name for field in dataclasses.fields(EncoderConfig)}
    if clash := [field.name for field in dataclasses.fields(options_class) if field.name in shared]:
        raise TypeError(
            f"encoder {name!r}: its option {clash[0]!r} is a key of every encoder: name it otherwise"
        )


def shardable_encoders() -> list[str]:
    """The encoders strategy=fsdp can shard (declared so: `EncoderTraits(shardable=True)`)."""
    return [name for name in ENCODERS if TRAITS.get(name, EncoderTraits()).shardable]


def traits(name: str) -> EncoderTraits:
    if name not in TRAITS:
        raise UserError(f"unknown encoder {name!r}: choose one of {', '.join(sorted(ENCODERS))}")
    return TRAITS[name]
