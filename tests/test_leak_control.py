"""The planted-leak study's data (dataset_builders/leak_control.py): CR in thirds."""

import csv

from dataset_builders import leak_control
from mtl.transfer_tasks.tasks import read_task


def test_cr_is_split_into_a_leak_a_control_out_of_the_test_set_and_the_rest(shared_data, tmp_path):
    source = shared_data / "senteval" / "downstream"
    counts = leak_control.build(source, tmp_path / "out")
    whole = read_task("CR", source).splits["all"]
    assert sum(counts.values()) == len(whole.labels) and max(counts.values()) - min(counts.values()) <= 2
    kept = read_task("CR", tmp_path / "out" / "downstream").splits["all"]
    assert len(kept.labels) == counts["A"] + counts["C"]  # the control's third is no test item
    with open(tmp_path / "out" / "crB" / "train.tsv", encoding="utf-8") as handle:
        control = {row[0] for row in list(csv.reader(handle, delimiter="\t"))[1:]}
    assert len(control) > 1000 and not control & set(kept.sentences[0])
    with open(tmp_path / "out" / "crA" / "train.tsv", encoding="utf-8") as handle:
        leak = {row[0] for row in list(csv.reader(handle, delimiter="\t"))[1:]}
    assert leak <= set(kept.sentences[0])  # the leak's sentences are test items
    assert (tmp_path / "out" / "downstream" / "MR").resolve() == (source / "MR").resolve()
