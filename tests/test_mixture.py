"""`just mixture-search`: proxies of sampled mixtures, a regression, the predicted mixture against
the usual ones at the target budget with seeds, resumable."""

import json

import numpy as np
import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.jobs import mixture

from .browser import can_look, look_at
from .conftest import FIXTURES, args_for


def test_the_regression_gives_a_planted_noise_task_the_smallest_weight():
    """Proxy scores that a task helps, another helps less and a noise task (shuffled labels) only
    takes steps from: the predicted best mixture gives the noise task the least, and the held-out
    error is small against the scores' spread."""
    mixtures = mixture.draw_mixtures(16, 3, 1.0, seed=0)
    rng = np.random.default_rng(0)
    scores = (
        0.6
        + 0.2 * mixtures[:, 0]
        + 0.1 * mixtures[:, 1]
        - 0.05 * mixtures[:, 0] ** 2
        + rng.normal(0, 0.005, 16)
    )
    fitted = mixture.fit(mixtures, scores)
    candidates = np.random.default_rng(1).dirichlet(np.ones(3), size=20_000)
    best = candidates[np.argmax(fitted.predict(candidates))]
    assert np.argmin(best) == 2 and fitted.loo_mae < 0.25 * np.std(scores)
    assert np.allclose(mixtures.sum(axis=1), 1) and mixtures.min() >= 0.004


def test_a_search_trains_proxies_fits_and_gives_verdicts_and_resumes_without_retraining(
    tiny_data, senteval, tmp_path, capsys
):
    noise = tmp_path / "noise.toml"
    noise.write_text(f'kind = "nli"\nsource = "{FIXTURES / "snli_tiny"}"\nshuffle_labels = true\nbatch = 8\n')
    out = tmp_path / "search"
    train = [
        a
        for a in args_for(tiny_data, out, f"tasks=nli,squad,{noise}")
        if not a.startswith(("out=", "max_steps="))
    ]
    # trials=4: the fewest proxies a regression takes (each is a training process of its own)
    command = [
        "mixture-search", *train, "trials=4", "proxy_budget=steps:4", "budget=steps:4", "seeds=2",
        "candidates=2000", "transfer_tasks=MR,CR", f"transfer_data={senteval}", f"out={out}",
    ]  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "mixture-search.json").read_text())
    assert result["tasks"] == ["nli", "squad", "noise"] and len(result["proxies"]) == 4
    assert result["fit"]["kind"] in ("linear", "quadratic") and result["fit"]["loo_mae"] >= 0
    assert set(result["mixtures"]) == {"predicted", "best-proxy", "proportional", "temperature"}
    assert sum(result["mixtures"]["predicted"]) == pytest.approx(1, abs=1e-3)
    proxy = json.loads((out / "proxies" / "proxy01" / "config.json").read_text())["config"]
    assert proxy["schedule"]["schedule"] == "proportional" and proxy["optim"]["stop"] == "max_steps"
    assert proxy["tasks"]["nli"]["prob"] == pytest.approx(
        result["proxies"]["proxy01"]["mixture"][0], abs=1e-4
    )
    assert proxy["tasks"]["noise"]["prob"] is None  # the last task takes what is left
    arms = {p.name for p in (out / "arms").iterdir() if p.is_dir()}
    assert arms == {
        f"{a}-seed{s}" for a in ("predicted", "best-proxy", "proportional", "temperature") for s in (1, 2)
    }
    assert {(r["task"], r["baseline"]) for r in result["verdicts"]} == {
        (t, b) for t in ("MR", "CR") for b in ("best-proxy", "proportional", "temperature")
    }
    assert all(r["verdict"] in ("helps", "hurts", "no evidence") for r in result["verdicts"])
    page = (out / "mixture-search.html").read_text()
    assert "held-out error" in page and "<td>MR</td>" in page
    if can_look():  # in a browser, as tests/test_pages.py looks at the other pages
        assert not (problems := look_at(out / "mixture-search.html", "mixture-search")), problems
    # run again: nothing trains again (each run's summary untouched), the result is the same
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*/*/summary.json")}
    assert main(command) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/*/summary.json")} == stamps
    assert json.loads((out / "mixture-search.json").read_text())["mixtures"] == result["mixtures"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tasks=nli"], "nli trains alone"),
        (["schedule=blocks"], "mixture-search sets it for each run"),
        (["nli.prob=0.5"], "mixture-search sets it for each run"),
        (["budget=examples:100"], "give steps:N or minutes:N budgets"),
        (["trials=0"], "trials"),
    ],
)
def test_bad_mixture_search_arguments_are_one_line(tiny_data, tmp_path, args, message):
    with pytest.raises(UserError, match=message):
        config, train = mixture.parse([*args_for(tiny_data, tmp_path)[:3], *args])
        mixture.training_tasks(train)
