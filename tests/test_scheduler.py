from collections import Counter

import pytest

from mtl.errors import UserError
from mtl.train.data.scheduler import ProportionalOptions, Scheduler, TemperatureOptions, temperature_at


def order(scheduler, steps):
    return "".join(scheduler.task_at(step)[0] for step in range(steps))


def test_blocks_alternate_fixed_runs():
    scheduler = Scheduler({"nli": 3, "squad": 2})
    assert order(scheduler, 12) == "nnnssnnnssnn"
    assert [s for s in range(12) if scheduler.block_ends_after(s)] == [2, 4, 7, 9]
    assert [s for s in range(12) if scheduler.is_cycle_end(s)] == [4, 9]


def test_one_task_when_the_other_has_no_steps():
    assert order(Scheduler({"nli": 0, "squad": 4}), 6) == "ssssss"
    single = Scheduler({"nli": 4, "squad": 0}, kind="round_robin")
    assert order(single, 6) == "nnnnnn"
    assert [s for s in range(10) if single.block_ends_after(s)] == [3, 7]


def test_round_robin_alternates_every_step():
    scheduler = Scheduler({"nli": 1000, "squad": 500}, kind="round_robin")
    assert order(scheduler, 6) == "nsnsns"
    assert all(scheduler.block_ends_after(s) for s in range(6))


@pytest.mark.parametrize(("kind", "expected_nli"), [("proportional", 0.8), ("temperature", 2 / 3)])
def test_sampling_follows_sizes_and_is_a_pure_function_of_step(kind, expected_nli):
    sizes = {"nli": 400, "squad": 100}  # temperature 2: sqrt(400) : sqrt(100) = 2 : 1
    scheduler = Scheduler({"nli": 1, "squad": 1}, kind=kind, sizes=sizes, seed=3)  # T: 2, the default
    tasks = [scheduler.task_at(step) for step in range(20_000)]
    assert Counter(tasks)["nli"] / len(tasks) == pytest.approx(expected_nli, abs=0.01)
    assert [scheduler.task_at(step) for step in (19_999, 5, 17)] == [tasks[19_999], tasks[5], tasks[17]]
    again = Scheduler({"nli": 1, "squad": 1}, kind=kind, sizes=sizes, seed=3)
    assert order(again, 200) == order(scheduler, 200)
    assert order(Scheduler({"nli": 1, "squad": 1}, kind=kind, sizes=sizes, seed=4), 200) != order(
        scheduler, 200
    )
    ends = [s for s in range(200) if scheduler.block_ends_after(s)]
    assert all(tasks[s] != tasks[s + 1] for s in ends)


def test_a_tiny_temperature_picks_the_largest_task_instead_of_overflowing():
    sizes = {"nli": 550_000, "squad": 1_000_000}
    scheduler = Scheduler({"nli": 1, "squad": 1}, "temperature", sizes, options=TemperatureOptions(1e-300))
    assert scheduler.probabilities(1 / temperature_at(scheduler, 0)).tolist() == [0.0, 1.0]


def test_explicit_shares_are_exact_and_the_other_tasks_split_the_rest_by_size():
    sizes = {"nli": 1000, "squad": 3000, "qt": 6000}
    scheduler = Scheduler(dict.fromkeys(sizes, 1), "proportional", sizes, seed=5, shares={"nli": 0.5})
    assert scheduler.probabilities(1.0).tolist() == pytest.approx([0.5, 0.5 * 3 / 9, 0.5 * 6 / 9])
    drawn = [scheduler.task_at(step) for step in range(4000)]
    assert drawn == [scheduler.task_at(step) for step in range(4000)]  # a pure function of (seed, step)
    assert abs(Counter(drawn)["nli"] / 4000 - 0.5) < 0.03
    # the draws are the shares' intervals of the generator's numbers for (seed, step)
    import numpy as np

    first = np.random.default_rng([5, 0]).random()
    assert drawn[0] == ("nli" if first < 0.5 else "squad" if first < 0.5 + 0.5 / 3 else "qt")


def test_a_cap_limits_how_much_a_large_task_counts():
    sizes = {"nli": 550_000, "squad": 100_000}
    capped = Scheduler(
        {"nli": 1, "squad": 1}, "proportional", sizes, options=ProportionalOptions(cap=200_000)
    )
    assert capped.probabilities(1.0).tolist() == pytest.approx([2 / 3, 1 / 3])
    assert Scheduler({"nli": 1, "squad": 1}, "proportional", sizes).probabilities(1.0)[0] == pytest.approx(
        5.5 / 6.5
    )


def test_an_annealed_temperature_moves_linearly_from_start_to_end():
    sizes = {"nli": 100, "squad": 10_000}
    annealed = TemperatureOptions(temperature=1.0, temperature_end=11.0)
    scheduler = Scheduler({"nli": 1, "squad": 1}, "temperature", sizes, total_steps=2001, options=annealed)
    assert [temperature_at(scheduler, s) for s in (0, 1000, 2000, 5000)] == pytest.approx(
        [1.0, 6.0, 11.0, 11.0]
    )
    early = Counter(scheduler.task_at(s) for s in range(0, 200))["nli"]  # T from 1 to 2: 1% to 9%
    late = Counter(scheduler.task_at(s) for s in range(1800, 2000))["nli"]  # T near 11: 40%
    assert early < 20 and late > 60
    fixed = Scheduler({"nli": 1, "squad": 1}, "temperature", sizes, options=TemperatureOptions(11.0))
    assert fixed.probabilities(1 / 11)[0] == pytest.approx(
        100 ** (1 / 11) / (100 ** (1 / 11) + 10_000 ** (1 / 11))
    )


def test_mixed_trains_every_task_at_every_step_in_cycles():
    scheduler = Scheduler({"nli": 3, "squad": 2}, "mixed")
    assert all(scheduler.tasks_at(s) == ["nli", "squad"] for s in range(10))
    assert [s for s in range(12) if scheduler.block_ends_after(s)] == [4, 9]


def test_sequential_trains_each_task_once_for_its_share_of_the_run():
    scheduler = Scheduler({"nli": 2, "squad": 1, "qt": 1}, "sequential", total_steps=10)
    assert order(scheduler, 12) == "nnnnnsssqqqq"  # shares 2:1:1 of 10 steps (5, 3 rounded, 2), then qt on
    assert [s for s in range(10) if scheduler.block_ends_after(s)] == [4, 7]


def test_two_stage_trains_every_task_then_the_first_alone():
    from mtl.train.data.scheduler import TwoStageOptions

    scheduler = Scheduler({"nli": 2, "squad": 1}, "two_stage", total_steps=12, options=TwoStageOptions(0.5))
    assert order(scheduler, 12) == "nnsnns" + "n" * 6


def test_a_staged_schedule_needs_the_runs_length():
    from mtl.train.config.train_config import TrainConfig, with_overrides

    with pytest.raises(
        UserError, match="schedule=sequential divides the run's steps between its stages: give max_steps="
    ):
        with_overrides(TrainConfig(), ["schedule=sequential"])
    config = with_overrides(TrainConfig(), ["schedule=two_stage", "first_stage=0.25", "max_steps=8"])
    assert config.schedule.schedule_options.first_stage == 0.25
