"""SentEval's PyTorch classifier and its validation schemes (Conneau & Kiela 2018, Section 4;
senteval/tools/classifier.py and validation.py), for `just transfer mode=senteval`.

A linear layer (nhid=0: SentEval's logistic regression) or one hidden layer with dropout and a
sigmoid (nhid>0: its MLP), trained with `optim` in batches of `batch_size`, an "epoch" being
`epoch_size` passes over the training data; the best epoch on the validation data is kept and
training stops once the validation accuracy has failed to improve `tenacity` + 1 times (not
necessarily in a row: SentEval never resets that count). The L2 penalty (weight decay) is chosen
from 1e-5 ... 1e-2 as SentEval's PyTorch path does. Losses are averaged over the batch, as
SentEval's `CrossEntropyLoss` does on any PyTorch since 0.4 (its `size_average = False` is set
after construction, which no longer changes the reduction).
"""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import torch
from joblib import Parallel, delayed

from mtl.eval.configs import OPTIMIZER_NAMES, SentEvalParams
from mtl.eval.transfer import fitting, linear_step
from mtl.eval.transfer.fitting import ClassifierFamily, in_points
from mtl.runtime.no_dynamo import without_dynamo

OPTIMIZERS = dict(
    zip(
        OPTIMIZER_NAMES,
        map(without_dynamo, (torch.optim.Adam, torch.optim.RMSprop, torch.optim.SGD, torch.optim.Adagrad,
                             torch.optim.Adadelta, torch.optim.Adamax)),
        strict=True,
    )
)  # fmt: skip


def optimizer(spec: str, parameters, weight_decay: float) -> torch.optim.Optimizer:
    """SentEval's optimizer strings: a name, then optional `,key=value` settings."""
    name, *settings = spec.split(",")
    options = {key: float(value) for key, value in (s.split("=", 1) for s in settings)}
    if name == "sgd":
        options.setdefault("lr", 0.1)
    return OPTIMIZERS[name](parameters, weight_decay=weight_decay, **options)


class SentEvalClassifier:
    def __init__(self, inputs: int, classes: int, l2reg: float, params: SentEvalParams):
        torch.manual_seed(params.seed)
        self.random = np.random.RandomState(params.seed)
        self.params = params
        if params.nhid == 0:
            self.model = torch.nn.Sequential(torch.nn.Linear(inputs, classes))
        else:
            self.model = torch.nn.Sequential(
                torch.nn.Linear(inputs, params.nhid),
                torch.nn.Dropout(params.dropout),
                torch.nn.Sigmoid(),
                torch.nn.Linear(params.nhid, classes),
            )
        # Logistic regression (nhid=0) trains by hand-called kernels: the same weights, less host work.
        self.linear = self.model[0] if params.nhid == 0 else None
        self.update = None
        if self.linear is not None:
            linear_step.detach(self.linear)
            self.update = linear_step.update(params.optim, self.linear, l2reg)
        self.optimizer = None if self.update else optimizer(params.optim, self.model.parameters(), l2reg)

    def fit(self, x, y, validation: tuple | None = None, validation_split: float = 0.0) -> float:
        """Train until the validation accuracy stops improving; keep the best epoch. Returns it."""
        x, y = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
        if validation is None:  # SentEval: a random share of the training data
            order = self.random.permutation(len(x))
            held = order[: int(validation_split * len(x))]
            kept = order[int(validation_split * len(x)) :]
            validation, x, y = (x[held], y[held]), x[kept], y[kept]
        best, best_state, misses, epoch = -1.0, copy.deepcopy(self.model.state_dict()), 0, 0
        while epoch <= self.params.max_epoch:
            self.model.train()
            for _ in range(self.params.epoch_size):
                order = torch.from_numpy(self.random.permutation(len(x)))
                for batch in order.split(self.params.batch_size):
                    self.train_step(x.index_select(0, batch), y.index_select(0, batch))
            epoch += self.params.epoch_size
            accuracy = self.score(*validation)
            if accuracy > best:
                best, best_state = accuracy, copy.deepcopy(self.model.state_dict())
            else:
                if misses >= self.params.tenacity:
                    break
                misses += 1
        self.model.load_state_dict(best_state)
        return best

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if self.linear is None:
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            return
        grads = linear_step.gradients(self.linear, x, y)
        if self.update is not None:
            self.update(grads)
            return
        for parameter, grad in zip(self.model.parameters(), grads, strict=True):
            parameter.grad = grad
        self.optimizer.step()

    def predict(self, x) -> np.ndarray:
        self.model.eval()
        with torch.no_grad():
            return self.model(torch.as_tensor(x, dtype=torch.float32)).argmax(dim=1).numpy()

    def tested(self, x, y) -> dict[str, np.ndarray]:
        """Per test item: the prediction, the gold label and the classes' log-probabilities."""
        self.model.eval()
        with torch.no_grad():
            logits = self.model(torch.as_tensor(x, dtype=torch.float32))
        return {
            "predicted": logits.argmax(dim=1).numpy(),
            "gold": np.asarray(y),
            "log_probs": torch.log_softmax(logits, dim=1).numpy(),
        }

    def score(self, x, y) -> float:
        return float((self.predict(x) == np.asarray(y)).mean())


def _classifier(x, y, l2reg: float, params: SentEvalParams) -> SentEvalClassifier:
    return SentEvalClassifier(x.shape[1], int(np.max(y)) + 1, l2reg, params)


@contextlib.contextmanager
def one_thread():
    """One torch thread per fitting process (two run side by side); the caller's count is restored,
    as jobs=1 fits in the caller's own process."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _scan_penalty(x, y, l2reg: float, params: SentEvalParams) -> float:
    """SentEval's k-fold validation score of one penalty on (x, y), in its rounded points."""
    from sklearn.model_selection import StratifiedKFold  # here: classifiers.py's docstring says why

    with one_thread():
        folds = StratifiedKFold(params.kfold, shuffle=True, random_state=params.seed)
        scores = []
        for a, b in folds.split(x, y):
            model = _classifier(x, y, l2reg, params)
            model.fit(x[a], y[a], validation=(x[b], y[b]))
            scores.append(model.score(x[b], y[b]))
        return in_points(np.mean(scores))


def _fit_and_test(
    x_train, y_train, x_test, y_test, l2reg: float, params: SentEvalParams
) -> dict[str, np.ndarray]:
    """The final fit of a k-fold protocol (5% of the training data held out to stop on): its test items."""
    with one_thread():
        model, _ = SentEvalFamily(params).final_fit(x_train, y_train, l2reg)
        return model.tested(x_test, y_test)


# joblib hands a worker each array over 1 MB as a memory map of one copy on disk; read-only, torch
# warns ("The given NumPy array is not writable") on every fit's first tensor. Copy-on-write maps
# are writable and still shared: nothing is copied unless written, which the fits never do.
SHARED_READ = "c"


# What SentEval's folds cost to fit (`SentEvalFamily.fit_cost`: items x dimensions x outer folds
# x penalties x the batches' worth of epochs each inner scan runs), from which two worker
# processes fit them: below it they are fitted in the caller's process. Two workers cost ~6 CPU-s
# to start (each imports torch and scikit-learn) and never save CPU; they save wall time only
# where the fits take well over their start. Measured (issue 105, GloVe 50d, prototyping, 2
# cores, cgroup CPU): CR (0.9e6) in the caller 4.9 s and 5.1 CPU-s against 7.1 s and 11.2 CPU-s
# with workers; MR (2.5e6) 8.9 s either way, 9.2 against 14.2 CPU-s: ~2.3 s of fits per 1e6. From
# 6.5e6 (~15 s in one process, as fitting.WORKERS_FROM's) the workers halve the fits' wall time for
# their start: MR under the default configuration is 6.7e7 (~150 s in one process).
SENTEVAL_WORKERS_FROM = 6_500_000


class SentEvalFamily(ClassifierFamily):
    """SentEval's classifier (`params`): the penalty (weight decay) by k-fold validation scans,
    the final fit stopped on 5% of the training data; compared and reported in rounded points."""

    def __init__(self, params: SentEvalParams):
        self.params = params
        self.penalties = self.train_test_penalties = params.penalties
        self.folds, self.seed, self.jobs = params.kfold, params.seed, params.jobs

    def make(self, penalty: float, x, y) -> SentEvalClassifier:
        return _classifier(x, y, penalty, self.params)

    def final_fit(self, x, y, penalty: float) -> tuple[SentEvalClassifier, float]:
        model = self.make(penalty, x, y)
        return model, model.fit(x, y, validation_split=0.05)

    def reported(self, accuracy: float) -> float:
        return in_points(accuracy) / 100

    def fit_cost(self, x) -> int:
        """Items x dimensions x outer folds x penalties, times what each penalty's inner k-fold scan
        runs: inner folds x the epochs a fit takes (epoch_size passes, until `tenacity` epochs
        without gain) over the batch size (the per-batch cost dominates these small models):
        SentEval's default configuration is ~27x its prototyping one, as SentEval's own times are
        (MR 415 against 15.8 s, RESULTS)."""
        p = self.params
        return int(
            x.size * self.folds * len(self.penalties) * p.kfold * p.epoch_size * p.tenacity / p.batch_size
        )

    def processes(self, x) -> int:
        """`jobs` where SentEval's fits of `x` pay back the workers' start, else the caller's one."""
        return 1 if self.fit_cost(x) < SENTEVAL_WORKERS_FROM else self.jobs

    def choose_penalty(self, x, y, penalties) -> tuple[float, float]:
        scores = Parallel(n_jobs=self.processes(x), mmap_mode=SHARED_READ)(
            delayed(_scan_penalty)(x, y, l2reg, self.params) for l2reg in penalties
        )
        return penalties[int(np.argmax(scores))], float(np.max(scores)) / 100

    def fitted_folds(self, x, y, folds):
        """SentEval's InnerKFoldClassifier, scheduled as (outer fold x penalty) scans, then one
        final fit per outer fold, so that the processes share the work evenly (5 outer folds over
        2 processes leave one idle a third of the time); every fit seeds itself, so the order
        changes nothing."""
        penalties = self.params.penalties
        jobs = self.processes(x)
        scans = Parallel(n_jobs=jobs, mmap_mode=SHARED_READ)(
            delayed(_scan_penalty)(x[train], y[train], l2reg, self.params)
            for train, _ in folds
            for l2reg in penalties
        )
        scores = np.reshape(scans, (len(folds), len(penalties)))
        tests = Parallel(n_jobs=jobs, mmap_mode=SHARED_READ, return_as="generator")(
            delayed(_fit_and_test)(
                x[train], y[train], x[test], y[test], penalties[int(np.argmax(row))], self.params
            )
            for (train, test), row in zip(folds, scores, strict=True)
        )
        return zip(tests, scores.max(axis=1) / 100, strict=True)


def inner_kfold(x: np.ndarray, y: np.ndarray, params: SentEvalParams) -> dict[str, float]:
    """MR, CR, SUBJ, MPQA: k outer folds, the penalty chosen by k inner folds of each training fold."""
    return fitting.cross_validated(SentEvalFamily(params), x, y)


def kfold_train_test(x_train, y_train, x_test, y_test, params: SentEvalParams) -> dict[str, float]:
    """TREC, MRPC: the penalty by k folds of train, then trained on train (5% held out) and tested."""
    return fitting.train_test(SentEvalFamily(params), x_train, y_train, x_test, y_test)


def split(x_train, y_train, x_dev, y_dev, x_test, y_test, params: SentEvalParams) -> dict[str, float]:
    """SST, SICK-E: the penalty by dev accuracy, early stopping on dev."""
    return fitting.dev_tuned(SentEvalFamily(params), x_train, y_train, x_dev, y_dev, x_test, y_test)
