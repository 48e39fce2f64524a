import pytest

from mtl.errors import UserError
from mtl.transfer_tasks.probing_tasks import GENERATED, SENTEVAL_FILES
from mtl.transfer_tasks.registry import TRANSFER_TASKS
from mtl.transfer_tasks.tasks import read_task

# ../shared/data/README.md
COUNTS = {
    "MR": {"all": 10_662},
    "CR": {"all": 3_775},
    "SUBJ": {"all": 10_000},
    "MPQA": {"all": 10_606},
    "SST2": {"train": 67_349, "dev": 872, "test": 1_821},
    "SST5": {"train": 8_544, "dev": 1_101, "test": 2_210},
    "TREC": {"train": 5_452, "test": 500},
    "MRPC": {"train": 4_076, "test": 1_725},
    "SICK-E": {"train": 4_500, "dev": 500, "test": 4_927},
    "SICK-R": {"train": 4_500, "dev": 500, "test": 4_927},
    "STS-B": {"train": 5_749, "dev": 1_500, "test": 1_379},
}
LABELS = {"MR": (5_331, 5_331), "CR": (2_407, 1_368), "SUBJ": (5_000, 5_000), "MPQA": (3_312, 7_294)}


PROBING = {*SENTEVAL_FILES, *(name for name, _ in GENERATED.values())}  # files not in the shared data


@pytest.mark.parametrize("name", sorted(set(TRANSFER_TASKS) - PROBING))
def test_every_reader_parses_the_real_files(shared_data, name):
    task = read_task(name, shared_data / "senteval" / "downstream")
    sizes = {split: len(data) for split, data in task.splits.items()}
    if name in COUNTS:
        assert sizes == COUNTS[name]
    if name in LABELS:
        labels = task.splits["all"].labels
        assert (labels.count(1), labels.count(0)) == LABELS[name]
    if name == "STS14":
        assert sum(sizes.values()) == 3_750 and len(sizes) == 6
    if name == "TREC":  # SentEval's class ids (trec.py): ABBR 0, DESC 1, ENTY 2, HUM 3, LOC 4, NUM 5
        assert task.splits["train"].labels[:2] == [1, 2]  # DESC:manner, ENTY:cremat
        assert sorted(set(task.splits["train"].labels)) == [0, 1, 2, 3, 4, 5]
    for data in task.splits.values():
        assert all(len(column) == len(data.labels) for column in data.sentences)
        assert sum(not text for column in data.sentences for text in column) <= 5


def test_missing_and_malformed_files_are_named(tmp_path):
    with pytest.raises(UserError, match=r"transfer data file .*MR/rt-polarity.pos is missing"):
        read_task("MR", tmp_path)
    (tmp_path / "TREC").mkdir()
    (tmp_path / "TREC" / "train_5500.label").write_text("DESC:manner How ?\nnot-a-label\n")
    with pytest.raises(UserError, match=r"line 2 of transfer data file .*train_5500.label is malformed"):
        read_task("TREC", tmp_path)
    with pytest.raises(UserError, match="unknown transfer task 'MRR': choose from MR, CR"):
        read_task("MRR", tmp_path)
