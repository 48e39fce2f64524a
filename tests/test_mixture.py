"""`just mixture-search`: proxies of sampled mixtures, a regression, the predicted mixture against
the usual ones at the target budget with seeds, resumable."""

import json

import numpy as np
import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.studies import mixture, study

from .browser import can_look, look_at
from .conftest import FIXTURES, args_for


def _planted(mixtures: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Proxy scores where a task helps, another helps less and a noise task (shuffled labels) only
    takes steps from them, with a little noise."""
    return (
        0.6
        + 0.2 * mixtures[:, 0]
        + 0.1 * mixtures[:, 1]
        - 0.05 * mixtures[:, 0] ** 2
        + rng.normal(0, 0.005, len(mixtures))
    )


@pytest.mark.parametrize("search_seed", range(5))
def test_a_planted_noise_task_gets_at_most_a_2_percent_share(search_seed):
    """RegMix's proxies (zero shares allowed) and the top-k mean: the noise task's share of the
    optimum is at most 0.02 in each of 5 searches, the gate finds skill, and the bootstrap's 90%
    range of that share stays under 0.1."""
    prior = mixture.by_size(np.array([9987.0, 20000.0, 9987.0]), 0.5)
    mixtures = mixture.draw_regmix(24, prior, 0.01, search_seed, 0x5EA12C)
    scores = _planted(mixtures, np.random.default_rng(search_seed))
    fitted = mixture.fit(mixtures, scores)
    gate = mixture.skill(fitted, scores)
    assert gate.enough(0.3) and gate.fit_mae < gate.constant_mae
    candidates = mixture.draw_regmix(20_000, prior, 0.01, search_seed, 0xCA11)
    best = mixture.optimum(fitted.model, candidates, 128)
    assert best[2] <= 0.02 and best.sum() == pytest.approx(1)
    low, high = mixture.optimum_spread(mixtures, scores, fitted.kind, candidates, 128, 50, search_seed)
    assert (low <= high).all() and high[2] < 0.1


def test_proxies_are_drawn_as_regmix_draws_them():
    prior = mixture.by_size(np.array([550_000.0, 100_000.0, 1_000.0]), 0.5)
    drawn = mixture.draw_regmix(400, prior, 0.01, 0, 1)
    assert np.allclose(drawn.sum(axis=1), 1) and len(np.unique(drawn, axis=0)) == 400
    assert (drawn == 0).any(axis=1).mean() > 0.2  # small strengths: tasks sit proxies out
    assert ((drawn > 0) & (drawn < 0.01)).sum() == 0  # nothing below min_share but 0
    # about the prior (distinct draws only, as RegMix keeps them: the one-task draws collapse)
    assert np.allclose(drawn.mean(axis=0), prior, atol=0.1)
    assert (np.argsort(drawn.mean(axis=0)) == np.argsort(prior)).all()
    assert (drawn == mixture.draw_regmix(400, prior, 0.01, 0, 1)).all()  # the search seed fixes them


def test_a_regression_on_noise_says_it_has_no_skill():
    """Scores that the mixture does not drive: the gate refuses (rank correlation under 0.3 or an
    error no better than the constant's) for each of 5 draws."""
    prior = np.full(3, 1 / 3)
    for seed in range(5):
        mixtures = mixture.draw_regmix(16, prior, 0.01, seed, 2)
        scores = np.random.default_rng(seed).normal(0.6, 0.02, 16)
        gate = mixture.skill(mixture.fit(mixtures, scores), scores)
        assert not gate.enough(0.3), gate.said()
    flat = mixture.skill(mixture.fit(mixtures, np.full(16, 0.5)), np.full(16, 0.5))
    assert flat.spearman == 0 and not flat.enough(0.3)


def test_repetition_matched_proxies_see_each_task_as_often_as_the_target_run():
    keys = mixture.repetition_keys(["nli", "squad"], np.array([9987.0, 87599.0]), "steps:40", "steps:1000")
    assert keys == ["nli.max_train=400", "squad.max_train=3504"]  # 4% of each: the epochs match at any share
    assert mixture.repetition_keys(["nli"], np.array([10.0]), "steps:100", "steps:100") == []


def test_a_task_with_share_0_is_never_drawn_and_the_last_drawn_takes_what_is_left():
    keys = mixture.mixture_keys(["nli", "squad", "noise"], np.array([0.3, 0.7, 0.0]))
    assert keys == ["schedule=proportional", "nli.prob=0.3000", "noise.prob=0.0000"]


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
    # trials=5: the fewest proxies the skill gate takes (each is a training process of its own)
    command = [
        "mixture-search", *train, "trials=5", "skill_permutations=19", "proxy_budget=steps:4", "budget=steps:4", "seeds=2",
        "candidates=2000", "transfer_tasks=MR,CR", f"transfer_data={senteval}", f"out={out}",
    ]  # fmt: skip
    # scored by a number every proxy shares, the proxies rank nothing: no skill, no arm trained
    assert main([*command, "score=global_step", "bootstrap=20"]) == 0, capsys.readouterr().err
    result = json.loads((out / "mixture-search.json").read_text())
    assert (
        not result["skill"]["enough"] and result["verdicts"] == [] and "predicted" not in result["mixtures"]
    )
    assert not (out / "arms").exists() and "No skill" in (out / "mixture-search.md").read_text()
    assert "no predicted mixture was trained" in (out / "mixture-search.html").read_text()
    # asked to train it anyway (the same proxies, not trained again)
    command.append("train_without_skill=true")
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "mixture-search.json").read_text())
    assert result["tasks"] == ["nli", "squad", "noise"] and len(result["proxies"]) == 5
    assert result["skill"]["permutations"] == 19 and 0.05 <= result["skill"]["permutation_p"] <= 1
    assert result["fit"]["kind"] in ("linear", "quadratic") and result["fit"]["loo_mae"] >= 0
    assert set(result["mixtures"]) == {"predicted", "best-proxy", "proportional", "temperature"}
    assert sum(result["mixtures"]["predicted"]) == pytest.approx(1, abs=1e-3)
    proxy = json.loads((out / "proxies" / "proxy01" / "config.json").read_text())["config"]
    assert proxy["schedule"]["schedule"] == "proportional" and proxy["optim"]["stop"] == "max_steps"
    assert proxy["tasks"]["nli"]["prob"] == pytest.approx(
        result["proxies"]["proxy01"]["mixture"][0], abs=1e-4
    )
    drawn = [
        t
        for t, share in zip(result["tasks"], result["proxies"]["proxy01"]["mixture"], strict=True)
        if share > 0
    ]
    left = [t for t in result["tasks"] if proxy["tasks"][t]["prob"] is None]
    assert left == drawn[-1:]  # the last task drawn takes what is left
    arms = {p.name for p in (out / "arms").iterdir() if p.is_dir()}
    assert arms == {
        f"{a}-seed{s}" for a in ("predicted", "best-proxy", "proportional", "temperature") for s in (1, 2)
    }
    assert {(r["task"], r["baseline"]) for r in result["verdicts"]} == {
        (t, b) for t in ("MR", "CR") for b in ("best-proxy", "proportional", "temperature")
    }
    assert {r["family"] for r in result["verdicts"]} == {6}  # Holm over 3 baselines x 2 tasks
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
        (["trials=4"], "the skill gate needs 5 proxies at least"),
    ],
)
def test_bad_mixture_search_arguments_are_one_line(tiny_data, tmp_path, args, message):
    with pytest.raises(UserError, match=message):
        config, train = study.parse(mixture.MixtureSearch(), [*args_for(tiny_data, tmp_path)[:3], *args])
        mixture.training_tasks(train)


def test_a_search_begun_before_regmix_proxies_resumes_as_it_began(tmp_path):
    """Its proxies' sweep.json has no proxies= among its fixed keys: it keeps its uniform draws
    and argmax (the runs it trained stay its own); a new search, regmix or uniform, says which."""
    (tmp_path / "proxies").mkdir()
    record = tmp_path / "proxies" / "sweep.json"
    record.write_text(json.dumps({"fixed": ["tasks=nli,squad", "proxy_budget=steps:4", "alpha=1"]}))
    assert mixture.legacy_proxies(tmp_path)
    record.write_text(json.dumps({"fixed": ["tasks=nli,squad", "alpha=1", "proxies=uniform"]}))
    assert not mixture.legacy_proxies(tmp_path)
    assert not mixture.legacy_proxies(tmp_path / "nothing")


def test_the_skill_gate_is_a_permutation_test_of_its_own_procedure():
    """Scores of pure noise pass the gate about 5% of the time whatever the number of proxies
    (the fit choosing linear or quadratic is inside what is shuffled; `just bench-verdicts`
    measures 200 searches at 8 and 16 proxies); scores a mixture explains pass it."""
    from tools.calibration import gate_check

    (eight,) = gate_check(proxies=(8,), searches=12, permutations=19)
    assert eight.passed_now <= 3, eight  # 12 searches at 5%: 3 or more has odds under 2%
    rng = np.random.default_rng(3)
    mixtures = rng.dirichlet(np.ones(3), 10)
    scores = mixtures @ np.array([1.0, 0.2, -0.5]) + rng.normal(0, 0.02, 10)
    gate = mixture.gated_skill(mixtures, scores, mixture.fit(mixtures, scores), 39, 0)
    assert gate.enough(0.3) and gate.permutation_p == pytest.approx(1 / 40) and "permutation p" in gate.said()
