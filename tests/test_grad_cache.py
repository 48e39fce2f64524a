"""GradCache (`<task>.mini_batch=`: an in-batch loss over a batch larger than memory holds): the
same loss and gradients as the whole in-batch batch at once, for ranking and Quick-Thoughts."""

import pytest
import torch

from mtl.errors import UserError
from mtl.models.precision import bf16_supported
from mtl.train.config.inputs import resolve_inputs
from mtl.train.loop.run import config_from_args
from mtl.train.loop.trainer import Trainer

from .conftest import FIXTURES, args_for

CORPUS = FIXTURES / "corpus_tiny.txt"
TASKS = {
    "mnrl": ("tasks=nli,mnrl", f"mnrl.source={FIXTURES / 'snli_tiny'}", "mnrl.batch=12"),
    "qt": ("tasks=nli,qt", f"qt.corpus={CORPUS}", f"qt.dev={CORPUS}", "qt.batch=12"),
}


def one_step(tiny_data, out, task: str, *keys: str) -> tuple[float, dict[str, torch.Tensor], Trainer]:
    """The loss of the first `task` step, and every trained parameter's gradient (before clipping)."""
    # fp32 unless a test asks: auto is bf16 on a CPU with native bf16, and these compare to 1e-5;
    # on the CPU: on a GPU cuDNN's fp32 LSTM runs on TF32 (tests/test_cuda.py has the CUDA twins)
    pinned = [
        f"{key}={value}"
        for key, value in {"precision": "fp32", "device": "cpu"}.items()
        if not any(given.startswith(f"{key}=") for given in keys)
    ]
    config = resolve_inputs(
        config_from_args(
            args_for(tiny_data, out, *TASKS[task], "optim=sgd", "max_grad_norm=0", *pinned, *keys)
        )
    )
    trainer = Trainer(config, out, progress=False)
    rows = trainer.run.setup.streams[task].next()[0]
    result = trainer.step({task: rows}, 0)
    gradients = {
        name: p.grad.clone()
        for name, p in trainer.run.model.named_parameters()
        if p.grad is not None and name.split(".")[0] in ("encoder", "heads")
    }
    return result.loss, gradients, trainer


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("mini_batch", [1, 5])
def test_cached_steps_give_the_whole_batchs_loss_and_gradients(tiny_data, tmp_path, task, mini_batch):
    loss, gradients, _ = one_step(tiny_data, tmp_path / "whole", task)
    cached_loss, cached, trainer = one_step(
        tiny_data, tmp_path / "cached", task, f"{task}.mini_batch={mini_batch}"
    )
    assert cached_loss == pytest.approx(loss, rel=1e-5)
    assert gradients.keys() == cached.keys() and len(gradients) > 2
    for name, gradient in gradients.items():
        torch.testing.assert_close(cached[name], gradient, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.skipif(
    not bf16_supported(torch.device("cpu")), reason="this CPU has no native bf16 (AVX512-BF16 or AMX)"
)
@pytest.mark.parametrize("task", sorted(TASKS))
def test_cached_steps_under_bf16_give_the_whole_batchs_loss_to_bf16s_tolerance(tiny_data, tmp_path, task):
    loss, gradients, _ = one_step(tiny_data, tmp_path / "whole", task, "precision=bf16")
    cached_loss, cached, _ = one_step(
        tiny_data, tmp_path / "cached", task, "precision=bf16", f"{task}.mini_batch=5"
    )
    assert cached_loss == pytest.approx(loss, rel=2**-7)  # bf16 keeps 8 bits of mantissa
    # Each tensor as a whole: oneDNN's bf16 LSTM sums a weight's gradient over the whole batch's
    # time steps at bf16 precision, the cached path over chunks into fp32 grads (seen: 0.1-3.4% apart;
    # a wrong mask or chunk is 100%).
    for name, gradient in gradients.items():
        assert (cached[name] - gradient).norm() <= 0.05 * gradient.norm() + 1e-6, name


@pytest.mark.parametrize("task", sorted(TASKS))
def test_cached_steps_with_matryoshka_give_the_whole_batchs_gradients(tiny_data, tmp_path, task):
    widths = f"{task}.matryoshka=8,2"
    loss, gradients, _ = one_step(tiny_data, tmp_path / "whole", task, widths)
    cached_loss, cached, _ = one_step(tiny_data, tmp_path / "cached", task, widths, f"{task}.mini_batch=5")
    assert cached_loss == pytest.approx(loss, rel=1e-5)
    for name, gradient in gradients.items():
        torch.testing.assert_close(cached[name], gradient, rtol=1e-4, atol=1e-6, msg=name)


def test_a_trainer_on_shared_prepared_data_caches_by_its_own_config(tiny_data, tmp_path, monkeypatch):
    """The benches prepare data once and build trainers of other keys on it: GradCache follows the
    trainer's `<task>.mini_batch=`, not the one the data was prepared with."""
    from mtl.train.data.training_data import prepare
    from mtl.train.step import strategy as step

    calls = []
    real = step.cached_backward
    monkeypatch.setattr(step, "cached_backward", lambda *args: calls.append(args[2]) or real(*args))
    whole = resolve_inputs(config_from_args(args_for(tiny_data, tmp_path / "whole", *TASKS["mnrl"])))
    data = prepare(whole, progress=False)
    cached = resolve_inputs(
        config_from_args(args_for(tiny_data, tmp_path / "cached", *TASKS["mnrl"], "mnrl.mini_batch=5"))
    )
    trainer = Trainer(cached, tmp_path / "cached", data=data, progress=False)
    trainer.train_step({"mnrl": trainer.run.setup.streams["mnrl"].next()[0]})
    assert calls == [5]


def test_dropout_draws_the_same_masks_in_both_passes(tiny_data, tmp_path, monkeypatch):
    """With dropout the second pass must replay the first's masks: else the cached gradients
    belong to other embeddings than the ones the loss saw (and training drifts)."""
    from mtl.train.step import grad_cache

    seen = []
    real = grad_cache.rows_of

    def recording(sentences, part):
        seen.append(part)
        return real(sentences, part)

    monkeypatch.setattr(grad_cache, "rows_of", recording)
    keys = ("encoder_dropout=0.5", "encoder=bilstm2", "mnrl.mini_batch=4")
    _, _, trainer = one_step(tiny_data, tmp_path / "run", "mnrl", *keys)
    encoder, head = trainer.run.model.encoder, trainer.run.model.heads["mnrl"]
    rows = trainer.run.setup.streams["mnrl"].next()[0]
    sentences = trainer.step.prepare("mnrl", rows).micro_batches[0][0]
    trainer.run.model.train()
    state = grad_cache.RandomState(trainer.run.device)
    first = head.embed(encoder, grad_cache.rows_of(sentences, slice(0, 4)))
    state.restore()
    again = head.embed(encoder, grad_cache.rows_of(sentences, slice(0, 4)))
    for a, b in zip(first, again, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert len(seen) >= 6  # 12 examples in chunks of 4: 3 chunks, embedded twice


def test_mini_batch_is_a_key_of_in_batch_tasks_only(tiny_data, tmp_path):
    with pytest.raises(UserError, match="nli.mini_batch"):
        config_from_args(args_for(tiny_data, tmp_path / "run", "nli.mini_batch=4"))


def one_mixed_step(
    tiny_data, out, balancer: str, *keys: str
) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """The first schedule=mixed step's per-task losses, and every gradient it leaves (the
    balancer's parameters' too)."""
    config = resolve_inputs(
        config_from_args(
            args_for(
                tiny_data,
                out,
                *TASKS["mnrl"],
                "schedule=mixed",
                f"balancer={balancer}",
                "optim=sgd",
                "max_grad_norm=0",
                "precision=fp32",
                "device=cpu",  # as one_step
                *keys,
            )
        )
    )
    trainer = Trainer(config, out, progress=False)
    batches = {task: trainer.run.setup.streams[task].next()[0] for task in ("nli", "mnrl")}
    result = trainer.step(batches, 0)
    parameters = [
        *trainer.run.model.named_parameters(),
        *trainer.run.setup.balancer.named_parameters("balancer"),
    ]
    gradients = {name: p.grad.clone() for name, p in parameters if p.grad is not None}
    return {task: r.loss for task, r in result.tasks.items()}, gradients


@pytest.mark.parametrize("balancer", ["sum", "uncertainty"])
def test_the_mixed_step_caches_an_in_batch_task_as_the_task_step_does(
    tiny_data, tmp_path, balancer, monkeypatch
):
    # uncertainty weighs each task's loss by a learned exp(-s): GradCache's backward starts from
    # that loss's gradient, and s gets its own from the whole batch's loss
    from mtl.train.step import strategy as step  # the forward/backward both steps share

    calls = []
    real = step.cached_backward
    monkeypatch.setattr(step, "cached_backward", lambda *args: calls.append(args[2]) or real(*args))
    losses, gradients = one_mixed_step(tiny_data, tmp_path / "whole", balancer)
    assert calls == []
    cached_losses, cached = one_mixed_step(tiny_data, tmp_path / "cached", balancer, "mnrl.mini_batch=5")
    assert calls == [5]  # mnrl's batch of 12 in chunks of 5 (was silently whole before)
    assert cached_losses == pytest.approx(losses, rel=1e-5)
    assert gradients.keys() == cached.keys() and len(gradients) > 4
    if balancer == "uncertainty":
        assert any(name.startswith("balancer") for name in gradients)
    for name, gradient in gradients.items():
        torch.testing.assert_close(cached[name], gradient, rtol=1e-4, atol=1e-6, msg=name)
