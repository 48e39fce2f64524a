"""Every reader of a user's file, fed a few hundred damaged copies (a fixed seed), reads
each or refuses it in one line; `just fuzz` runs thousands."""

import dataclasses

import pytest

from mtl.errors import UserError
from tools import fuzz

CASES = {
    "encoder": 200,
    "task": 300,
    "corpus": 300,
    "vectors": 300,
    "snli": 300,
    "run": 30,  # each case draws a report page with its figures (1 s; 1.5 s on a loaded CI machine)
    "wandb": 20,  # each case runs W&B's reader, a process of its own (1 s)
    "caches": 300,
    "items": 300,
    "jobs": 300,
    "senteval": 300,
    "plan": 300,
    "affinity": 300,
    "merge": 300,
}


@pytest.mark.parametrize("reader", list(fuzz.READERS))
def test_damaged_inputs_are_read_or_refused_in_one_line(reader):
    outcomes = fuzz.fuzz(reader, CASES[reader], seed=0)
    assert outcomes.findings == []
    assert outcomes.ok > 0
    # the damage reaches both outcomes; a damaged cache entry is a miss, a damaged merge record no
    # merge (its ledger then says why), never an error
    assert (outcomes.errors > 0) == (reader not in ("caches", "merge"))
    assert outcomes.cases == CASES[reader]


def test_every_format_mtl_reads_back_has_a_fuzz_target():
    covered = {name for target in fuzz.READERS.values() for name in target.formats}
    assert set(fuzz.READ_BACK) <= covered, f"no fuzz target for {set(fuzz.READ_BACK) - covered}"


def test_a_reader_that_crashes_on_damage_is_found(monkeypatch):
    def fragile(folder):
        if folder.name != "valid":
            raise KeyError("row")  # what a reader without checks raises on a damaged copy

    monkeypatch.setitem(fuzz.READERS, "vectors", dataclasses.replace(fuzz.READERS["vectors"], read=fragile))
    outcomes = fuzz.fuzz("vectors", 3, seed=5)
    assert outcomes.findings == [
        f"vectors seed=5 case={case}: a traceback: KeyError: \"'row'\"" for case in range(3)
    ]
    with pytest.raises(UserError, match=r"3 damaged inputs were neither read nor refused in one line"):
        fuzz.run(fuzz.FuzzConfig(readers="vectors", cases=3, seed=5))


def test_the_same_seed_gives_the_same_damage(tmp_path):
    import numpy as np

    data = b"the 0.1 0.2\nman 0.3 0.4\n"
    first = [fuzz.damaged_bytes(data, np.random.default_rng([3, case])) for case in range(20)]
    assert first == [fuzz.damaged_bytes(data, np.random.default_rng([3, case])) for case in range(20)]
    assert len(set(first)) > 10
