"""Encoder=hf: a pretrained transformers model as the shared encoder, on a tiny random BERT."""

import json

import numpy as np
import pytest
import torch

from mtl.errors import UserError
from mtl.eval.encoder import pretrained_encoder
from mtl.eval.loading import load_encoder
from mtl.models.encoders import hf
from mtl.models.encoders.base import EncoderConfig
from mtl.models.encoders.config import HFOptions
from mtl.train.config.train_config import TrainConfig, with_overrides
from mtl.train.optim.lr_schedules import warmup_then_decay
from tests.conftest import args_for, deterministic_summary, exported_weights, start_run, straight_and_resumed

SENTENCES = ["A man plays a guitar.", "Two dogs run in the park near a small red house.", "A woman sleeps."]


def hf_args(tiny_bert, *extra):
    defaults = ("encoder=hf", f"hf_model={tiny_bert}", "max_seq_length=16")
    given = {arg.partition("=")[0] for arg in extra}
    return (*(a for a in defaults if a.partition("=")[0] not in given), *extra)


def test_a_run_fine_tunes_and_exports_a_hugging_face_folder(tiny_data, tiny_bert, tmp_path):
    run_dir, summary = start_run(tiny_data, tmp_path / "run", *hf_args(tiny_bert))
    assert summary["global_step"] == 10
    record = json.loads((run_dir / "config.json").read_text())
    optim = record["config"]["optim"]
    assert (optim["optim"], optim["lr"], optim["hf_lr"], optim["warmup_steps"], optim["max_grad_norm"]) == (
        "adamw",
        1e-3,
        2e-5,
        1,
        1.0,
    )
    assert record["config"]["model"]["pooling"] == "mean"
    assert "tokenizer" in record["inputs"] and "vectors" not in record["inputs"]
    folder = run_dir / "encoder"
    assert {"model.safetensors", "config.json", "tokenizer.json", "modules.json"} <= {
        p.name for p in folder.iterdir()
    }
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_max_tokens"]

    # The folder alone, through transformers: mean of the last states over real tokens.
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(SENTENCES, padding=True, truncation=True, max_length=16, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"][:, :, None].float()
    expected = ((states * mask).sum(1) / mask.sum(1)).numpy()
    encoded = load_encoder(run_dir, device="cpu").encode(SENTENCES, batch_size=2, progress=False)
    np.testing.assert_allclose(encoded, expected, rtol=1e-4, atol=1e-5)
    # The best checkpoint holds the same encoder (encoder.json is exported from it).
    from_checkpoint = load_encoder(run_dir / "checkpoints" / "best.pt", device="cpu")
    np.testing.assert_allclose(
        from_checkpoint.encode(SENTENCES, progress=False), encoded, rtol=1e-5, atol=1e-6
    )


def test_a_killed_hf_run_resumes_exactly(tiny_data, tiny_bert, tmp_path):
    from mtl.train.loop import run

    extra = (*hf_args(tiny_bert), "max_steps=12", "checkpoint_every=4", "hf_freeze_layers=1")
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=7)  # dropout and warmup mid-way
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    a = torch.load(straight_dir / "checkpoints" / "best.pt", weights_only=True)["model"]
    b = torch.load(cut_dir / "checkpoints" / "best.pt", weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_freezing_keeps_the_embeddings_and_first_layers_pretrained(tiny_data, tiny_bert, tmp_path):
    from transformers import AutoModel

    run_dir, summary = start_run(
        tiny_data, tmp_path / "run", *hf_args(tiny_bert, "hf_freeze_embeddings=true", "hf_freeze_layers=1")
    )
    before = AutoModel.from_pretrained(tiny_bert).state_dict()
    after = AutoModel.from_pretrained(run_dir / "encoder").state_dict()
    frozen = [k for k in before if k.startswith(("embeddings.", "encoder.layer.0."))]
    trained = [k for k in before if k.startswith("encoder.layer.1.")]
    assert frozen and trained
    assert all(torch.equal(before[k], after[k]) for k in frozen)
    assert all(not torch.equal(before[k], after[k]) for k in trained if k.endswith("weight"))
    assert summary["params/frozen"] == sum(before[k].numel() for k in frozen)


def test_warmup_then_linear_decay_as_transformers_schedules_it():
    from transformers import get_linear_schedule_with_warmup

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    reference = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=3, num_training_steps=10)
    factors = []
    for _ in range(12):
        factors.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    assert factors == pytest.approx([warmup_then_decay(step, 3, 10) for step in range(12)])
    assert factors[:4] == pytest.approx([0, 1 / 3, 2 / 3, 1]) and factors[10:] == [0, 0]


@pytest.mark.parametrize(
    "name, theirs",
    [("linear", "get_linear_schedule_with_warmup"), ("cosine", "get_cosine_schedule_with_warmup"),
     ("constant", "get_constant_schedule_with_warmup")],
)  # fmt: skip
def test_each_step_schedule_is_the_one_transformers_maintains(name, theirs):
    """mtl sets the lr from the global step (a resume needs no scheduler state, and several
    optimizers follow one schedule), so it keeps its factors; they are transformers' to the step."""
    import transformers

    from mtl.train.optim.lr_schedules import LR_SCHEDULES

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    arguments = {"num_warmup_steps": 3} | ({} if name == "constant" else {"num_training_steps": 10})
    reference = getattr(transformers, theirs)(optimizer, **arguments)
    expected = []
    for _ in range(11):  # to max_steps: past it, transformers' cosine rises again and mtl's stays at 0
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    schedule = LR_SCHEDULES[name].__new__(LR_SCHEDULES[name])
    assert [schedule.factor(step, 3, 10) for step in range(11)] == pytest.approx(expected, abs=1e-12)


def test_the_backbone_and_the_heads_have_their_own_lr(tiny_data, tiny_bert, tmp_path):
    from mtl.runs import read_metrics

    extra = hf_args(tiny_bert, "lr=0.004", "hf_lr=0.0001", "warmup_steps=4", "max_steps=8")
    run_dir, _ = start_run(tiny_data, tmp_path / "run", *extra)
    records = read_metrics(run_dir / "metrics.jsonl")
    lrs = [r.get("nli/lr", r.get("squad/lr")) for r in records if "nli/lr" in r or "squad/lr" in r]
    # The logged lr is the backbone's: 1e-4 x warmup (0, 1/4, 2/4, 3/4), then decay (1, 3/4, 2/4, 1/4).
    assert lrs == pytest.approx([1e-4 * f for f in (0, 0.25, 0.5, 0.75, 1, 0.75, 0.5, 0.25)])
    saved = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    groups = saved["optimizers"]["nli"]["param_groups"]
    assert sorted({g["base_lr"] for g in groups}) == [1e-4, 0.004]
    assert {g["weight_decay"] for g in groups} == {0.0, 0.01}


def test_an_hf_encoder_ignores_padding(tiny_bert):
    config = EncoderConfig(encoder="hf", options=HFOptions(hf_model=str(tiny_bert), max_seq_length=32))
    encoder = pretrained_encoder(config, "cpu", "tiny")
    together = encoder.encode(SENTENCES, batch_size=3, progress=False)  # padded to the longest
    alone = np.concatenate([encoder.encode([s], progress=False) for s in SENTENCES])
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)
    for pooling, width in (("cls", 16), ("max", 16), ("max+mean", 32)):
        assert encoder.encode(SENTENCES, pooling=pooling, progress=False).shape[1] == width


def test_long_sentences_are_cut_and_counted(tiny_data, tiny_bert, tmp_path):
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    config = config_from_args(args_for(tiny_data, tmp_path / "run", *hf_args(tiny_bert, "max_seq_length=6")))
    data = prepare(config, progress=False)
    lengths = data.table.lengths
    assert lengths.max() == 6 and data.vocabulary is None and data.embeddings is None
    uncut = prepare(
        config_from_args(args_for(tiny_data, tmp_path / "run", *hf_args(tiny_bert))), progress=False
    )
    assert data.statistics()["truncated_sentences"] == (uncut.table.lengths > 6).sum() > 0
    # Cut by the tokenizer's rules: the end token stays.
    sep = data.subwords.tokenizer.sep_token_id
    assert all(data.table.ids[data.table.offsets[row + 1] - 1] == sep for row in range(len(lengths)))


def test_accumulated_micro_batches_make_the_same_step(tiny_data, tmp_path):
    whole_dir, whole = start_run(tiny_data, tmp_path / "whole", "precision=fp32", "max_steps=6")
    parts_dir, parts = start_run(
        tiny_data, tmp_path / "parts", "precision=fp32", "max_steps=6", "accumulate=3"
    )
    a = exported_weights(whole_dir)
    b = exported_weights(parts_dir)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5)
    assert whole["best/nli/dev/acc"] == parts["best/nli/dev/acc"]


def test_a_hub_id_missing_offline_is_one_clear_error(monkeypatch, tmp_path):
    from mtl.files.hub import load_pretrained

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(UserError, match="not in the local Hugging Face cache.*pass a local model folder"):
        load_pretrained(lambda name: pytest.fail("must not try the Hub"), "someone/some-model", "model")
    with pytest.raises(UserError, match="no such folder"):
        load_pretrained(lambda name: None, str(tmp_path / "missing"), "model")
    with pytest.raises(UserError, match="holds no usable model"):
        from transformers import AutoModel

        (tmp_path / "empty").mkdir()
        load_pretrained(AutoModel.from_pretrained, str(tmp_path / "empty"), "model")


def test_baseline_hf_scores_the_model_as_it_comes(tiny_bert, senteval, tmp_path):
    from mtl.eval.transfer.suite import TransferConfig, run

    out, report = run(
        TransferConfig(
            baseline="hf",
            hf_model=str(tiny_bert),
            tasks="MR,CR",
            mode="fast",
            data=str(senteval),
            out=str(tmp_path / "baseline"),
            wandb="disabled",
            device="cpu",
        )
    )
    assert set(report["results"]) == {"MR", "CR"} and report["source"] == str(tiny_bert)
    assert (out / "transfer-fast.json").is_file()


def test_the_cpu_preset_trains_a_tiny_model(tiny_data, tiny_bert, tmp_path):
    _, summary = start_run(
        tiny_data,
        tmp_path / "run",
        "preset=cpu-small-hf",
        f"hf_model={tiny_bert}",
        "nli_train_split=train",
        "max_steps=3",
        "max_eval=20",
    )
    assert (
        summary["global_step"] == 3 and summary["params/nli_head"] == 4 * 16 * 3 + 3
    )  # a softmax classifier


def test_minilm_embeds_as_it_was_trained_and_fine_tunes(shared_data, tmp_path):
    """The real all-MiniLM-L6-v2: mean pooling as sentence-transformers computes it, and two NLI steps."""
    from transformers import AutoModel, AutoTokenizer

    model_dir = shared_data / "models" / "all-MiniLM-L6-v2"
    encoder = pretrained_encoder(
        EncoderConfig(encoder="hf", options=HFOptions(hf_model=str(model_dir))), "cpu", "minilm"
    )
    sentences = ["A man is playing a guitar.", "A person plays the guitar.", "The stock market fell sharply."]
    ours = encoder.encode(sentences, progress=False)
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"][:, :, None].float()
    np.testing.assert_allclose(ours, ((states * mask).sum(1) / mask.sum(1)).numpy(), rtol=1e-4, atol=1e-5)
    unit = ours / np.linalg.norm(ours, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > 0.8 > 0.2 > unit[0] @ unit[2]

    from mtl.train.loop import run

    config = run.config_from_args(
        [
            "encoder=hf",
            f"hf_model={model_dir}",
            f"snli={shared_data / 'snli'}",
            "nli_train_split=train_small",
            "steps_squad=0",
            "max_steps=2",
            "max_eval=16",
            "sample_test=true",  # not MiniLM over SNLI's whole test split
            "batch_nli=8",
            "wandb=disabled",
            f"out={tmp_path / 'run'}",
        ]
    )
    _, summary = run.start(config, progress=False)
    assert (
        summary["global_step"] == 2 and summary["params/encoder"] == 22_713_216 - 384 * 384 - 384
    )  # no pooler


def test_max_seq_length_beyond_the_models_positions_is_one_line(tiny_data, tiny_bert, tmp_path):
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    config = config_from_args(
        args_for(tiny_data, tmp_path / "run", *hf_args(tiny_bert, "max_seq_length=1000"))
    )
    with pytest.raises(
        UserError, match=r"max_seq_length=1000 is more than the 128 positions of .*: give max_seq_length=128"
    ):
        prepare(config, progress=False)


def test_a_model_without_its_pooler_loads_without_a_load_report(tiny_bert, tmp_path, capfd):
    from transformers.utils import logging as transformers_logging

    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_warning()  # as a user's session has it: the report is a warning
    try:
        said_when_loading(tiny_bert, tmp_path, capfd)
    finally:
        transformers_logging.set_verbosity(verbosity)


def said_when_loading(tiny_bert, tmp_path, capfd):
    from transformers import BertModel

    from mtl.models.encoders.hf import HFEncoder

    no_pooler, no_layer = tmp_path / "no-pooler", tmp_path / "no-layer"
    BertModel.from_pretrained(tiny_bert, add_pooling_layer=False).save_pretrained(no_pooler)
    model = BertModel.from_pretrained(tiny_bert)
    model.encoder.layer[1].output.dense = torch.nn.Identity()  # its weights leave the checkpoint
    model.save_pretrained(no_layer)
    capfd.readouterr()
    assert (
        HFEncoder(EncoderConfig(encoder="hf", options=HFOptions(hf_model=str(no_pooler)))).backbone.pooler
        is None
    )
    said = "".join(capfd.readouterr())
    assert "LOAD REPORT" not in said and "MISSING" not in said and "warning" not in said, said
    HFEncoder(EncoderConfig(encoder="hf", options=HFOptions(hf_model=str(no_layer))))
    warnings = [line for line in "".join(capfd.readouterr()).splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: hf_model={no_layer}: missing weights encoder.layer.1.output.dense.bias, "
        "encoder.layer.1.output.dense.weight (transformers' load report)"
    ]


def test_prompts_go_before_each_sentence_as_in_sentence_transformers(tiny_bert):
    encoder = pretrained_encoder(
        EncoderConfig(encoder="hf", options=HFOptions(hf_model=str(tiny_bert))), "cpu", "tiny"
    )
    sentences = ["a man plays a guitar", "the dog runs"]
    by_hand = encoder.encode(["query: " + s for s in sentences])
    np.testing.assert_array_equal(encoder.encode(sentences, prompt="query: "), by_hand)
    encoder.prompts = {"query": "query: ", "document": "passage: "}
    np.testing.assert_array_equal(encoder.encode(sentences, prompt_name="query"), by_hand)
    np.testing.assert_array_equal(encoder.encode(sentences, "query"), by_hand)  # second, by position
    plain = encoder.encode(sentences)
    assert not np.array_equal(plain, by_hand)
    encoder.default_prompt_name = "query"  # as sentence-transformers: used when no prompt is given
    np.testing.assert_array_equal(encoder.encode(sentences), by_hand)
    np.testing.assert_array_equal(encoder.encode(sentences, prompt=""), plain)  # prompt wins over the name
    with pytest.raises(
        UserError, match="prompt_name='qa'\\) is not a prompt of tiny \\('query', 'document'\\)"
    ):
        encoder.encode(sentences, prompt_name="qa")
    assert encoder.max_seq_length == HFOptions.max_seq_length == 128
    encoder.max_seq_length = 4
    np.testing.assert_array_equal(encoder.encode("the dog runs far away"), encoder.encode("the dog"))


def test_a_tasks_prompt_is_trained_on_and_exported_under_its_name(tiny_data, tiny_bert, tmp_path):
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    args = args_for(tiny_data, tmp_path / "run", *hf_args(tiny_bert, "nli.prompt=query: "))
    data = prepare(config_from_args(args), progress=False)
    nli_rows = np.unique(data.examples["nli"]["train"].sentences)
    squad_rows = np.unique(data.examples["squad"]["train"].sentences)
    assert all(data.table.texts[r].startswith("query: ") for r in nli_rows)
    assert not any(data.table.texts[r].startswith("query: ") for r in squad_rows)  # its own prompt: none
    run_dir, _ = start_run(tiny_data, tmp_path / "run", *hf_args(tiny_bert, "nli.prompt=query: "))
    saved = json.loads((run_dir / "encoder" / "config_sentence_transformers.json").read_text())
    assert saved["prompts"] == {"nli": "query: "} and saved["default_prompt_name"] is None
    encoder = load_encoder(run_dir, device="cpu")
    assert encoder.prompts == {"nli": "query: "}
    by_hand = encoder.encode(["query: " + s for s in SENTENCES])
    np.testing.assert_array_equal(encoder.encode(SENTENCES, prompt_name="nli"), by_hand)
    from sentence_transformers import SentenceTransformer  # the folder, as its users load it

    folder = SentenceTransformer(str(run_dir / "encoder"), device="cpu")
    assert folder.prompts["nli"] == "query: "  # (sentence-transformers 5+ adds empty query/document ones)
    np.testing.assert_allclose(folder.encode(SENTENCES, prompt_name="nli"), by_hand, rtol=1e-4, atol=1e-5)


def test_a_prompt_is_refused_for_an_encoder_of_word_vectors(tiny_data, tmp_path):
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    config = config_from_args(args_for(tiny_data, tmp_path / "run", "nli.prompt=query: "))
    with pytest.raises(UserError, match=r"nli.prompt='query: ' is for encoder=hf .* leave nli.prompt empty"):
        prepare(config, progress=False)


def test_gradient_checkpointing_gives_the_same_gradients(tiny_bert):
    def gradients(checkpointing: bool) -> dict:
        torch.manual_seed(0)
        model = pretrained_encoder(
            EncoderConfig(
                encoder="hf", options=HFOptions(hf_model=str(tiny_bert), gradient_checkpointing=checkpointing)
            ),
            "cpu",
            "t",
        )
        encoder = model.encoder.train()  # dropout on: the recomputation must replay its masks
        assert hf.checkpointing(encoder.backbone) == checkpointing
        tokens = torch.tensor(model.token_ids(SENTENCES)[0])[None].repeat(2, 1)
        torch.manual_seed(1)
        encoder(tokens, torch.tensor([len(tokens[0])] * 2)).pow(2).sum().backward()
        return {n: p.grad for n, p in encoder.named_parameters() if p.grad is not None}

    plain, checkpointed = gradients(False), gradients(True)
    assert plain.keys() == checkpointed.keys() and plain
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], rtol=1e-5, atol=1e-6, msg=name)


def test_gradient_checkpointing_trains_an_hf_run_and_is_refused_elsewhere(tiny_data, tiny_bert, tmp_path):
    _, summary = start_run(
        tiny_data, tmp_path / "run", *hf_args(tiny_bert, "gradient_checkpointing=true", "max_steps=3")
    )
    assert summary["global_step"] == 3
    with pytest.raises(
        UserError,
        match=r"gradient_checkpointing=true: unknown key for encoder=bilstm \(gradient_checkpointing configures encoder=hf\)",
    ):
        with_overrides(TrainConfig(), ["gradient_checkpointing=true"])


def test_lora_starts_as_the_model_trains_only_adapters_and_exports_them_merged(
    tiny_data, tiny_bert, tmp_path
):
    # Hu et al. (2021): W + (alpha / r) B A with B = 0 at first: the same embeddings before training.
    torch.manual_seed(0)
    plain = pretrained_encoder(
        EncoderConfig(encoder="hf", options=HFOptions(hf_model=str(tiny_bert), max_seq_length=16)), "cpu", "p"
    )
    adapted_config = EncoderConfig(
        encoder="hf", options=HFOptions(hf_model=str(tiny_bert), max_seq_length=16, lora_r=4)
    )
    adapted = pretrained_encoder(adapted_config, "cpu", "a")
    np.testing.assert_allclose(adapted.encode(SENTENCES), plain.encode(SENTENCES), rtol=1e-6, atol=1e-6)
    trained = [name for name, p in adapted.encoder.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in name for name in trained)  # peft's default for BERT: query, value
    assert {name.split(".")[-4] for name in trained} == {"query", "value"}  # ...query.lora_A.default.weight

    extra = hf_args(tiny_bert, "lora_r=4", "lora_targets=query,key,value", "encoder_lr=0.01", "max_steps=12")
    straight_dir, straight, resumed = straight_and_resumed(tiny_data, tmp_path, *extra)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    encoded = load_encoder(straight_dir, device="cpu").encode(SENTENCES, progress=False)
    assert not np.allclose(encoded, plain.encode(SENTENCES), atol=1e-4)  # the adapters trained
    # The export is a plain transformers folder, the adapters folded in: no peft needed to read it.
    from transformers import AutoModel

    merged = AutoModel.from_pretrained(straight_dir / "encoder").state_dict()
    assert not any("lora" in key for key in merged)
    before = AutoModel.from_pretrained(tiny_bert).state_dict()
    # (mtl drops BERT's pooler: transformers gives the folder a fresh one, not part of the embedding)
    changed = {k for k in before if not k.startswith("pooler.") and not torch.equal(before[k], merged[k])}
    assert changed and all(key.split(".")[-2] in ("query", "key", "value") for key in changed)
    best = load_encoder(straight_dir / "checkpoints" / "best.pt", device="cpu")
    np.testing.assert_allclose(best.encode(SENTENCES, progress=False), encoded, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "keys, message",
    [
        (("encoder=bilstm", "lora_r=4"), r"unknown key for encoder=bilstm \(\w+ configures encoder=hf\)"),
        (("lora_r=4", "hf_freeze_layers=1"), "leave out hf_freeze_layers="),
        (("lora_r=4", "lora_targets=nothing_here"), "lora_targets=nothing_here"),
    ],
)
def test_lora_where_it_cannot_apply_is_one_line(tiny_data, tiny_bert, tmp_path, keys, message):
    with pytest.raises(UserError, match=message):
        start_run(tiny_data, tmp_path / "run", *hf_args(tiny_bert, *keys))


def test_compile_runs_the_compiled_transformer_and_resumes_exactly(
    tiny_data, tiny_bert, tmp_path, monkeypatch
):
    # Inductor takes minutes to compile on CI's CPUs; dynamo's "eager" backend traces the same
    # graphs (what compile=true changes about a run) in seconds. The speed: just bench-hf compile=true.
    real, compiled = torch.nn.Module.compile, []

    def traced_eagerly(module, *args, **kwargs):
        compiled.append(type(module).__name__)
        real(module, *args, **{**kwargs, "backend": "eager"})

    monkeypatch.setattr(torch.nn.Module, "compile", traced_eagerly)
    extra = hf_args(tiny_bert, "compile=true", "max_steps=12", "checkpoint_every=4")
    straight_dir, straight, resumed = straight_and_resumed(tiny_data, tmp_path, *extra)
    assert compiled[0] == "BertModel" and set(compiled) == {"BertModel"}  # each run's backbone
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    # The same weights under the same names as an uncompiled run's: checkpoints and exports unchanged.
    _, plain = start_run(tiny_data, tmp_path / "plain", *hf_args(tiny_bert, "max_steps=12"))
    dev = lambda summary: {k: v for k, v in summary.items() if "/dev/" in k}  # noqa: E731
    assert dev(straight) and dev(plain) == dev(straight)
    compiled.clear()
    load_encoder(straight_dir, device="cpu").encode(SENTENCES, progress=False)
    assert compiled == []  # a loaded encoder runs as it is
    with pytest.raises(
        UserError, match=r"compile=true: unknown key for encoder=bilstm \(compile configures encoder=hf\)"
    ):
        with_overrides(TrainConfig(), ["compile=true"])
