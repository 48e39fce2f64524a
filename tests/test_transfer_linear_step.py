"""SentEval's logistic regression trained by hand-called kernels (mtl/eval/transfer/linear_step.py)
must give the very weights autograd and torch.optim give, and the rescheduled k-fold the very
numbers of SentEval's nested loops."""

import numpy as np
import pytest
import torch
from sklearn.model_selection import StratifiedKFold

from mtl.eval.transfer import linear_step
from mtl.eval.transfer.senteval_classifier import (
    SentEvalClassifier,
    SentEvalParams,
    in_points,
    inner_kfold,
    optimizer,
)


def batches(count: int = 40, inputs: int = 12, classes: int = 3):
    generator = torch.Generator().manual_seed(0)
    for step in range(count):
        size = 37 if step % 5 == 4 else 64  # a short last batch now and then, as an epoch's end has
        yield (
            torch.randn(size, inputs, generator=generator),
            torch.randint(0, classes, (size,), generator=generator),
        )


@pytest.mark.parametrize(
    "spec", ["rmsprop", "adam", "sgd", "adam,lr=0.01", "rmsprop,lr=0.001,alpha=0.9", "adagrad"]
)
@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
def test_hand_written_step_gives_autograd_and_torch_optim_weights_bit_for_bit(spec, weight_decay):
    torch.manual_seed(1)
    reference = torch.nn.Linear(12, 3)
    fast = torch.nn.Linear(12, 3)
    fast.load_state_dict(reference.state_dict())
    reference_optimizer = optimizer(spec, reference.parameters(), weight_decay)
    linear_step.detach(fast)
    update = linear_step.update(spec, fast, weight_decay)
    assert (update is None) == (spec == "adagrad")  # adagrad: torch.optim's own update, our gradients
    fallback = optimizer(spec, fast.parameters(), weight_decay) if update is None else None
    for x, y in batches():
        loss = torch.nn.functional.cross_entropy(reference(x), y)
        reference_optimizer.zero_grad()
        loss.backward()
        grads = linear_step.gradients(fast, x, y)
        assert torch.equal(grads[0], reference.weight.grad) and torch.equal(grads[1], reference.bias.grad)
        reference_optimizer.step()
        if update is not None:
            update(grads)
        else:
            fast.weight.grad, fast.bias.grad = grads
            fallback.step()
        assert torch.equal(fast.weight, reference.weight) and torch.equal(fast.bias, reference.bias)


def test_the_classifier_trains_logistic_regression_by_hand_and_an_mlp_by_autograd():
    assert SentEvalClassifier(4, 2, 0.0, SentEvalParams()).update is not None
    mlp = SentEvalClassifier(4, 2, 0.0, SentEvalParams(nhid=8))
    assert mlp.linear is None and mlp.update is None and mlp.optimizer is not None


def test_inner_kfold_rescheduled_equals_senteval_nested_loops():
    # SentEval's InnerKFoldClassifier as its code nests it: per outer fold, every penalty over the
    # inner folds, then the best penalty refitted with 5% held out and tested.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] + rng.normal(scale=1.5, size=300) > 0).astype(np.int64)
    params = SentEvalParams.prototyping(kfold=3, jobs=1)
    tests, devs, predicted = [], [], np.empty_like(y)
    for train, test in StratifiedKFold(3, shuffle=True, random_state=params.seed).split(x, y):
        inner, scores = StratifiedKFold(3, shuffle=True, random_state=params.seed), []
        for l2reg in params.penalties:
            fold_scores = []
            for a, b in inner.split(x[train], y[train]):
                model = SentEvalClassifier(6, 2, l2reg, params)
                model.fit(x[train][a], y[train][a], validation=(x[train][b], y[train][b]))
                fold_scores.append(model.score(x[train][b], y[train][b]))
            scores.append(in_points(np.mean(fold_scores)))
        model = SentEvalClassifier(6, 2, params.penalties[int(np.argmax(scores))], params)
        model.fit(x[train], y[train], validation_split=0.05)
        tests.append(model.score(x[test], y[test]))
        devs.append(max(scores) / 100)
        predicted[test] = model.predict(x[test])
    result = inner_kfold(x, y, params)
    items = result.pop("items")  # each item's prediction, from the fold it was tested in
    assert result == {"acc": float(np.mean(tests)), "dev_acc": float(np.mean(devs))}
    np.testing.assert_array_equal(items["predicted"], predicted)
    np.testing.assert_array_equal(items["log_probs"].argmax(axis=1), predicted)
