import copy
import math

import pytest
import torch
from torch import nn

from mtl.train.step.grad_buffer import GradientBuffer


def two_models():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    return model, copy.deepcopy(model)


def attached(model: nn.Module) -> tuple[list[nn.Parameter], GradientBuffer]:
    """`model`'s parameters and a buffer that is their gradient, after a backward pass."""
    parameters = list(model.parameters())
    buffer = GradientBuffer(parameters)
    buffer.attach(parameters)
    backward(model)
    return parameters, buffer


def backward(model: nn.Module) -> None:
    torch.manual_seed(1)
    (model(torch.randn(4, 5)) ** 2).sum().backward()


@pytest.mark.parametrize("max_norm", [0.1, 1000.0, math.inf])
def test_clipping_the_buffer_equals_clip_grad_norm(max_norm):
    model, reference = two_models()
    buffer = GradientBuffer(list(model.parameters()))
    buffer.attach(list(model.parameters()))
    backward(model)
    backward(reference)
    norm = buffer.clip(list(model.parameters()), max_norm)
    expected = nn.utils.clip_grad_norm_(reference.parameters(), max_norm)
    torch.testing.assert_close(norm, expected)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
    assert buffer.holds(list(model.parameters()))


def test_parameters_a_step_does_not_train_keep_no_gradient_and_do_not_count():
    model, reference = two_models()
    first = list(model[0].parameters())
    buffer = GradientBuffer(list(model.parameters()))
    buffer.attach(first)
    assert all(p.grad is None for p in model[2].parameters())
    backward(model)
    for p in model[2].parameters():  # trained by backward, but not this step's: the buffer is not theirs
        assert p.grad is not None and not any(p.grad is v for v in buffer.views.values())
    backward(reference)
    norm = buffer.clip(first, 0.1)
    torch.testing.assert_close(norm, nn.utils.clip_grad_norm_(list(reference[0].parameters()), 0.1))


def test_a_gradient_replaced_after_attach_is_clipped_parameter_by_parameter():
    model, reference = two_models()
    parameters, buffer = attached(model)
    parameters[0].grad = parameters[0].grad.clone()  # as a hook or a reducer might
    assert not buffer.holds(parameters)
    backward(reference)
    torch.testing.assert_close(
        buffer.clip(parameters, 0.1), nn.utils.clip_grad_norm_(reference.parameters(), 0.1)
    )
    torch.testing.assert_close(parameters[0].grad, next(reference.parameters()).grad)


def test_the_next_attach_starts_from_zero():
    model, _ = two_models()
    parameters, buffer = attached(model)
    buffer.attach(parameters)
    assert all(p.grad.abs().sum() == 0 for p in parameters)


def test_the_mixed_steps_range_operations_equal_their_per_parameter_form():
    """gradient_of, set_gradient, scale_gradient and clear: one op on the slice of the buffer
    that parameters side by side occupy, the same values as parameter by parameter elsewhere."""
    model, reference = two_models()
    parameters, buffer = attached(model)
    backward(reference)
    first, last = parameters[:2], [parameters[0], parameters[3]]  # side by side; not
    assert buffer.region(first) is not None and buffer.region(last) is None
    for group in (first, last):
        expected = torch.cat([p.grad.flatten() for p in group])
        torch.testing.assert_close(buffer.gradient_of(group, torch.device("cpu")), expected)
    values = torch.arange(sum(p.numel() for p in first), dtype=torch.float32)
    buffer.set_gradient(first, values)
    buffer.scale_gradient(first, torch.tensor(2.0))
    torch.testing.assert_close(torch.cat([p.grad.flatten() for p in first]), 2 * values)
    assert buffer.holds(parameters)  # written in place: still the buffer
    buffer.clear(first)
    assert all(p.grad is not None and not p.grad.any() for p in first)
    reference_parameters = list(reference.parameters())
    chosen = [reference_parameters[0], reference_parameters[3]]
    torch.testing.assert_close(
        buffer.gradient_of(last, torch.device("cpu")),
        torch.cat([torch.zeros_like(chosen[0]).flatten(), chosen[1].grad.flatten()]),
    )
    buffer.set_gradient(last, torch.ones(sum(p.numel() for p in last)))  # per parameter: own tensors
    assert not buffer.holds(parameters) and all(p.grad.eq(1).all() for p in last)
