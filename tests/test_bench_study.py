"""`just bench-study`: one small study with its members forked and one with each a fresh python,
each timed against its members' training seconds."""

import pytest

from mtl.cli import main
from tests.conftest import args_for
from tools import study
from tools.configs import BenchStudyConfig


def test_a_bench_study_times_both_kinds_of_study_against_their_training_steps(tiny_data, tmp_path, capsys):
    train = [
        a for a in args_for(tiny_data, tmp_path / "x") if not a.startswith(("out=", "max_steps=", "seed="))
    ]
    config = BenchStudyConfig(members=1, max_steps=2, repeats=1)
    results = study.run(config, train)
    for mode in study.MODES:
        (result,) = results[mode]
        assert 0 < result["train"] < result["wall"]
        assert result["rest_per_member"] == pytest.approx(result["wall"] - result["train"])
    text = study.report(results, config)
    assert "forked study = " in text and "x the fresh study's wall time" in text
    assert main(["bench-study", *train, "seed=3"]) == 2
    assert "seed=3: bench-study sets it for each run" in capsys.readouterr().err
