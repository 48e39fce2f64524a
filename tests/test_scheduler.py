from collections import Counter

import pytest

from mtl.train.scheduler import Scheduler


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
    scheduler = Scheduler({"nli": 1, "squad": 1}, kind=kind, sizes=sizes, temperature=2.0, seed=3)
    tasks = [scheduler.task_at(step) for step in range(20_000)]
    assert Counter(tasks)["nli"] / len(tasks) == pytest.approx(expected_nli, abs=0.01)
    assert [scheduler.task_at(step) for step in (19_999, 5, 17)] == [tasks[19_999], tasks[5], tasks[17]]
    again = Scheduler({"nli": 1, "squad": 1}, kind=kind, sizes=sizes, temperature=2.0, seed=3)
    assert order(again, 200) == order(scheduler, 200)
    assert order(
        Scheduler({"nli": 1, "squad": 1}, kind=kind, sizes=sizes, temperature=2.0, seed=4), 200
    ) != order(scheduler, 200)
    ends = [s for s in range(200) if scheduler.block_ends_after(s)]
    assert all(tasks[s] != tasks[s + 1] for s in ends)


def test_a_tiny_temperature_picks_the_largest_task_instead_of_overflowing():
    scheduler = Scheduler({"nli": 1, "squad": 1}, "temperature", {"nli": 550_000, "squad": 1_000_000}, 1e-300)
    assert scheduler.probabilities(1 / scheduler.temperature).tolist() == [0.0, 1.0]
