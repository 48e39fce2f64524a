"""`just get-senteval` against a local stand-in of SentEval's sources: the files it writes are
the recorded copy's, byte for byte; a download cut off resumes; a changed source, a damaged
archive and no network are one line each."""

import hashlib
import http.server
import io
import json
import os
import subprocess
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from dataset_builders import senteval
from dataset_builders.senteval_text import cat_v, moses_line, treebank_line, without_quotes
from mtl.cli import main
from mtl.errors import UserError
from mtl.transfer_tasks.tasks import read_task

from .conftest import one_error_line

SHARED = Path(os.environ["MTL_DATA_DIR"]) if os.environ.get("MTL_DATA_DIR") else None
needs_data = pytest.mark.skipif(
    SHARED is None,
    reason="MTL_DATA_DIR is not set: point it at ../shared/data to check against the real files",
)


class SourcesStandIn:
    """Serves `files` (name -> bytes) under their names, with byte ranges guarded by an ETag
    (If-Range; `etags=False`: a server that names no version); `cut_next` sends the first half of
    the next file, then drops the connection."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.ranges, self.cut_next, self.etags = files, [], False, True
        handler = type("Handler", (_Handler,), {"standin": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    standin: SourcesStandIn

    def log_message(self, *args):
        pass

    def do_GET(self):
        name = self.path.lstrip("/")
        if name not in self.standin.files:
            self.send_error(404)
            return
        data, start = self.standin.files[name], 0
        etag = f'"{hashlib.sha256(data).hexdigest()[:16]}"' if self.standin.etags else None
        ranged = self.headers.get("Range")
        if ranged and self.headers.get("If-Range") != etag:  # as RFC 9110: changed, sent whole
            ranged = None
        if ranged:
            start = int(ranged.removeprefix("bytes=").rstrip("-"))
            self.standin.ranges.append((name, start))
            if start >= len(data):  # as HTTP servers answer a range past the end
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(len(data) - start))
        if etag:
            self.send_header("ETag", etag)
        self.end_headers()
        if self.standin.cut_next:
            self.standin.cut_next = False
            self.wfile.write(data[start : start + (len(data) - start) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)  # mid-file: the client sees the connection end early
            return
        self.wfile.write(data[start:])


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def get(standin, out, tasks, *extra) -> int:
    return main(["get-senteval", f"out={out}", f"tasks={tasks}", f"mirror={standin.url}", *extra])


@pytest.fixture
def standin():
    servers = []

    def start(files):
        servers.append(SourcesStandIn(files))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def shared_sources() -> dict[str, bytes]:
    """SentEval's downloads as they would arrive, rebuilt from the recorded copy: the plain files
    as they are, the binary-classification zip and SNLI's zip from the tokenized files (the
    Treebank script leaves its own output unchanged, except one SUBJ line whose raw form is
    restored here); TREC's files are the raw ones already."""
    down = SHARED / "senteval" / "downstream"
    files = {
        f"sentiment-{s}": (down / "SST/binary" / f"sentiment-{s}").read_bytes()
        for s in ("train", "dev", "test")
    }
    files |= {
        f"stsa.fine.{s}": (down / "SST/fine" / f"sentiment-{s}").read_bytes()
        for s in ("train", "dev", "test")
    }
    for name in ("train_5500.label", "TREC_10.label"):
        files[name] = (down / "TREC" / name).read_bytes()
    for name in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"):
        files[name] = (down / "MRPC" / name).read_bytes()
    members = {}
    for task, (folder, names) in senteval.BINARY_TASKS.items():
        for name in names:
            members[f"data/{folder}/{name}"] = (down / task / name).read_bytes().replace(b"it' 's", b"it''s")
    files["datasmall_NB_ACL12.zip"] = zipped(members)
    snli = {}
    header = "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tcaptionID\tpairID\tlabel1"
    for split in ("dev", "test"):
        columns = [
            (SHARED / "snli" / f"{c}.{split}").read_bytes().decode().splitlines()
            for c in ("labels", "s1", "s2")
        ]
        rows = [
            f"{label}\t(\t)\t(\t)\t{s1}\t{s2}\tc\tp\t{label}" for label, s1, s2 in zip(*columns, strict=True)
        ]
        rows.insert(
            3, "-\t(\t)\t(\t)\tno gold label .\tnone .\tc\tp\t-"
        )  # dropped, as SentEval's awk drops it
        snli[f"snli_1.0/snli_1.0_{split}.txt"] = ("\n".join([header, *rows]) + "\n").encode()
    snli["snli_1.0/snli_1.0_train.txt"] = (
        header + "\nneutral\t(\t)\t(\t)\tA man.\tA dog.\tc\tp\tneutral\n"
    ).encode()
    files["snli_1.0.zip"] = zipped(snli)
    return files


EXACT_TASKS = "MR,CR,SUBJ,MPQA,SST2,SST5,TREC,MRPC,SNLI"


@needs_data
def test_the_files_written_are_the_recorded_copys_byte_for_byte(standin, tmp_path, capsys):
    server = standin(shared_sources())
    out = tmp_path / "senteval"
    assert get(server, out, EXACT_TASKS) == 0
    recorded = senteval.recorded()
    written = sorted(
        p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != senteval.MANIFEST
    )
    assert written == sorted(
        [p for p in recorded if p.split("/")[1] in ("MR", "CR", "SUBJ", "MPQA", "SST", "TREC", "MRPC")]
        + [f"downstream/SNLI/{c}.{s}" for c in ("labels", "s1", "s2") for s in ("train", "dev", "test")]
    )
    for path in written:
        if path in recorded:  # SNLI's training set has no recorded copy here
            source = SHARED / ("snli/" + Path(path).name if "SNLI" in path else "senteval/" + path)
            expected = source.read_bytes()
            if "TREC" in path:  # the shared copy holds the raw files, before the script's quote removal
                expected = without_quotes(expected)
            assert (out / path).read_bytes() == expected, path
    for task in ("MR", "CR", "SUBJ", "MPQA", "SST2", "SST5", "TREC", "MRPC"):
        read_task(task, out / "downstream")  # the layout the transfer suite reads
    assert not (out / ".downloads").exists() or not any((out / ".downloads").iterdir())
    assert "SNLI     3 files" not in capsys.readouterr().out
    assert get(server, out, EXACT_TASKS) == 0  # everything is here: nothing is fetched again
    assert capsys.readouterr().out.count("already here") == 9


@needs_data
def test_a_download_cut_off_resumes_where_it_stopped(standin, tmp_path, capsys):
    files = shared_sources()
    server = standin(files)
    server.cut_next = True
    out = tmp_path / "senteval"
    assert get(server, out, "MRPC") == 2
    assert "run again to resume" in one_error_line(capsys)
    partial = out / ".downloads" / "msr_paraphrase_train.txt.partial"
    kept = partial.stat().st_size
    assert 0 < kept < len(files["msr_paraphrase_train.txt"]) and not (out / "downstream").exists()
    assert get(server, out, "MRPC") == 0
    assert server.ranges == [("msr_paraphrase_train.txt", kept)]  # asked for the rest only
    assert (out / "downstream/MRPC/msr_paraphrase_train.txt").read_bytes() == files[
        "msr_paraphrase_train.txt"
    ]


@needs_data
def test_a_download_complete_but_not_yet_renamed_is_taken_as_it_is(standin, tmp_path):
    # killed between a download's last byte and its rename: the next run's range request is past
    # the end (HTTP 416), and the kept bytes are the whole file
    files = shared_sources()
    server = standin(files)
    out = tmp_path / "senteval"
    (out / ".downloads").mkdir(parents=True)
    for name in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"):
        (out / ".downloads" / f"{name}.partial").write_bytes(files[name])
        record = {
            "url": f"{server.url}/{name}",
            "validator": f'"{hashlib.sha256(files[name]).hexdigest()[:16]}"',
        }
        (out / ".downloads" / f"{name}.partial.json").write_text(json.dumps(record))
    assert get(server, out, "MRPC") == 0
    assert sorted(server.ranges) == sorted(
        (n, len(files[n])) for n in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt")
    )
    assert (out / "downstream/MRPC/msr_paraphrase_test.txt").read_bytes() == files["msr_paraphrase_test.txt"]


@needs_data
def test_a_source_that_changed_writes_nothing_of_its_task(standin, tmp_path, capsys):
    files = shared_sources()
    files["msr_paraphrase_test.txt"] += b"1\t1\t2\tA line SentEval never had .\tNor this .\n"
    out = tmp_path / "senteval"
    assert get(standin(files), out, "MRPC") == 2
    assert "msr_paraphrase_test.txt has SHA-256" in (line := one_error_line(capsys))
    assert "nothing of MRPC was written" in line
    assert not (out / "downstream").exists() and not list((out / ".downloads").iterdir())


def without_recorded_gold_scores(monkeypatch):
    """The stand-ins' STS gold scores are not the real ones, which are checked byte for byte."""
    recorded = senteval.recorded()
    monkeypatch.setattr(
        senteval, "recorded", lambda: {p: v for p, v in recorded.items() if "/STS.gs." not in p}
    )


def test_moses_tasks_are_tokenized_and_laid_out_as_senteval_does(standin, tmp_path, capsys, monkeypatch):
    without_recorded_gold_scores(monkeypatch)
    sts = {
        "sts-en-test-gs-2014/STS.input.images.txt": b"Don't stop, Bob.\tA cat's toy (red).\n",
        "sts-en-test-gs-2014/STS.gs.images.txt": b"3.2\n",
        **{f"sts-en-test-gs-2014/STS.input.{s}.txt": b"A b.\tC d.\n" for s in ("deft-forum", "deft-news", "headlines", "OnWN", "tweet-news")},
        **{f"sts-en-test-gs-2014/STS.gs.{s}.txt": b"1.0\n" for s in ("deft-forum", "deft-news", "headlines", "OnWN", "tweet-news")},
    }  # fmt: skip
    sick = {
        "SICK_train.txt": b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        b"1\tA man isn't walking.\tA man walks.\t3.5\tCONTRADICTION\n",
        "readme.txt": b"x",
    }
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w:gz") as archive:
        for split in ("train", "dev", "test"):
            data = b"main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane's taking off.\n"
            info = tarfile.TarInfo(f"stsbenchmark/sts-{split}.csv")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    files = {
        "STS14-en-test.zip": zipped(sts),
        "Stsbenchmark.tar.gz": tar.getvalue(),
        **{
            f"sick_{s}.zip": zipped({**sick, f"SICK_{s}.txt": sick["SICK_train.txt"]})
            for s in senteval.SICK_SPLITS
        },
    }
    files["sick_train.zip"] = zipped(sick)
    out = tmp_path / "senteval"
    assert get(standin(files), out, "STS14,STS-B,SICK-R") == 0
    down = out / "downstream"
    assert (
        down / "STS/STS14-en-test/STS.input.images.txt"
    ).read_text() == "don 't stop , bob .\ta cat 's toy ( red ) .\n"
    assert (
        (down / "STS/STSBenchmark/sts-dev.csv")
        .read_text()
        .endswith("a plane is taking off .\tan air plane 's taking off .\n")
    )
    assert (down / "SICK/SICK_train.txt").read_text().splitlines()[
        1
    ] == "1\tA man isn 't walking .\tA man walks .\t3.5\tCONTRADICTION"
    out_text = capsys.readouterr().out
    assert (
        "tokenized differently from the recorded copy" in out_text
    )  # these stand-ins are not the real files
    assert list(read_task("STS14", down).splits["images"].labels) == [3.2]


def test_no_network_is_one_line_and_leaves_nothing_looking_complete(tmp_path, capsys):
    out = tmp_path / "senteval"
    assert main(["get-senteval", f"out={out}", "tasks=TREC", "mirror=http://127.0.0.1:9"]) == 2
    line = one_error_line(capsys)
    assert "could not download train_5500.label from 127.0.0.1:9" in line and "by hand at" in line
    assert not (out / "downstream").exists()


def test_an_unknown_task_is_one_line(tmp_path, capsys):
    assert main(["get-senteval", f"out={tmp_path}", "tasks=MR,COCO"]) == 2
    assert "COCO is not fetched here" in one_error_line(capsys)


def test_cat_v_shows_bytes_as_gnu_cat_does():
    every_byte = bytes(range(256)) + b"\n"
    assert cat_v(every_byte) == subprocess.run(["cat", "-v"], input=every_byte, capture_output=True).stdout


def test_the_treebank_rules_split_as_the_sed_script_does():
    assert treebank_line('He said "I can\'t go," and left... (really)!') == (
        "He said `` I ca n't go , '' and left ... ( really ) ! "
    )
    assert treebank_line("it''s a cannot-lose deal .") == "it' 's a cannot-lose deal . "
    assert moses_line("  ", lowercase=True) == "  "  # Moses prints a blank line as it is


# ---- a hostile source: archives, versions, mirrors, a damaged manifest --------------------------


def sts14_zip(**changed: bytes) -> bytes:
    subsets = ("deft-forum", "deft-news", "headlines", "OnWN", "images", "tweet-news")
    members = {f"sts-en-test-gs-2014/STS.input.{s}.txt": b"A b.\tC d.\n" for s in subsets}
    members |= {f"sts-en-test-gs-2014/STS.gs.{s}.txt": b"1.0\n" for s in subsets}
    return zipped({**members, **changed})


def test_an_archive_member_that_climbs_out_of_its_folder_is_refused(standin, tmp_path, capsys, monkeypatch):
    without_recorded_gold_scores(monkeypatch)
    out = tmp_path / "data" / "senteval"
    climbing = sts14_zip(**{"sts-en-test-gs-2014/../../../../../../escaped.txt": b"x"})
    assert get(standin({"STS14-en-test.zip": climbing}), out, "STS14") == 2
    line = one_error_line(capsys)
    assert "which would be written outside its folder" in line and "it was removed" in line
    assert not list(tmp_path.rglob("escaped.txt")) and not (out / "downstream").exists()
    assert not (out / ".downloads" / "STS14-en-test.zip").exists()  # the next run fetches it anew


def test_a_tar_member_that_climbs_out_or_links_is_refused(standin, tmp_path, capsys):
    for make in ("climbs", "links"):
        tar = io.BytesIO()
        with tarfile.open(fileobj=tar, mode="w:gz") as archive:
            info = tarfile.TarInfo(
                "stsbenchmark/../../../../x" if make == "climbs" else "stsbenchmark/sts-dev.csv"
            )
            if make == "links":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            else:
                info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
        out = tmp_path / make
        assert get(standin({"Stsbenchmark.tar.gz": tar.getvalue()}), out, "STS-B") == 2
        said = "written outside its folder" if make == "climbs" else "is a link or a special file"
        assert said in one_error_line(capsys)
    assert not list(tmp_path.rglob("x"))


def test_a_small_archive_declaring_a_huge_member_is_refused_before_it_is_read(standin, tmp_path, capsys):
    bomb = zipped({"sts-en-test-gs-2014/STS.input.images.txt": b"\0" * (64 << 20)})  # 64 MiB in ~64 kB
    assert len(bomb) < 200_000
    assert get(standin({"STS14-en-test.zip": bomb}), tmp_path / "senteval", "STS14") == 2
    line = one_error_line(capsys)
    assert "declares 67,108,864 bytes from" in line and "200x compression" in line


def test_an_archive_missing_a_member_is_one_line(standin, tmp_path, capsys, monkeypatch):
    without_recorded_gold_scores(monkeypatch)
    lacking = sts14_zip()
    with zipfile.ZipFile(io.BytesIO(lacking)) as full:
        kept = {n: full.read(n) for n in full.namelist() if "images" not in n}
    assert get(standin({"STS14-en-test.zip": zipped(kept)}), tmp_path / "senteval", "STS14") == 2
    assert "STS14's download has no STS.input.images.txt: the source changed" in one_error_line(capsys)


def test_a_changed_gold_score_file_is_refused_though_sts_is_tokenized(standin, tmp_path, capsys):
    # STS's sentences go through sacremoses (may differ from Perl's Moses: reported), its gold
    # scores are copies and must be the recorded bytes: a source changed in transit is refused
    out = tmp_path / "senteval"
    assert get(standin({"STS14-en-test.zip": sts14_zip()}), out, "STS14") == 2
    line = one_error_line(capsys)
    assert "STS14-en-test/STS.gs." in line and "not the recorded" in line and "nothing of STS14" in line
    assert not (out / "downstream").exists()


def test_a_source_that_changed_between_attempts_is_fetched_whole_not_spliced(standin, tmp_path, capsys):
    old, new = b"old version\n" * 5000, b"NEW VERSION\n" * 5000
    server = standin({"TREC_10.label": old})
    server.cut_next = True
    download = senteval.Download("TREC_10.label", "http://unused")
    with pytest.raises(UserError, match="run again to resume"):
        senteval.fetch(download, tmp_path, server.url, 10)
    assert 0 < (tmp_path / "TREC_10.label.partial").stat().st_size < len(old)
    server.files["TREC_10.label"] = new  # the source changed, and its ETag with it
    assert senteval.fetch(download, tmp_path, server.url, 10).read_bytes() == new
    assert server.ranges == []  # If-Range did not match: the server sent the new file whole


def test_a_server_that_names_no_version_is_never_resumed(standin, tmp_path, capsys):
    files = {"train_5500.label": b"a line\n" * 20000, "TREC_10.label": b"b\n"}
    server = standin(files)
    server.etags, server.cut_next = False, True
    out = tmp_path / "senteval"
    assert get(server, out, "TREC") == 2
    assert "run again to download it anew (the server names no version" in one_error_line(capsys)
    download = senteval.Download("train_5500.label", "http://unused")
    assert (
        senteval.fetch(download, out / ".downloads", server.url, 10).read_bytes() == files["train_5500.label"]
    )
    assert server.ranges == []  # asked for the whole file again


def test_mirror_may_be_a_local_folder(tmp_path, capsys):
    mirror = tmp_path / "copies"
    mirror.mkdir()
    (mirror / "train_5500.label").write_bytes(
        b"DESC:manner How did serfdom develop in and then leave Russia ?\n"
    )
    out = tmp_path / "senteval"
    code = main(["get-senteval", f"out={out}", "tasks=TREC", f"mirror={mirror}"])
    assert code == 2 and "mirror=" in (line := one_error_line(capsys)) and "has no TREC_10.label" in line
    (mirror / "TREC_10.label").write_bytes(b"NUM:dist How far is it from Denver to Aspen ?\n")
    assert main(["get-senteval", f"out={out}", "tasks=TREC", f"mirror={mirror}"]) == 2  # not SentEval's bytes
    assert "has SHA-256" in one_error_line(capsys)
    assert main(["get-senteval", f"out={out}", "tasks=TREC", f"mirror={tmp_path / 'nowhere'}"]) == 2
    assert "is neither a URL (http://, https://) nor a folder" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        ("{", "is not JSON"),
        ('{"MR": 3}', "MR: Input should be a valid dictionary"),
        ('{"MR": {"files": {"../../x": {"size": 1, "sha256": "%s"}}}}' % ("0" * 64), "is not a path below"),
        ('{"MR": {"files": {"a": {"size": -1, "sha256": "%s"}}}}' % ("0" * 64), "greater than or equal to 0"),
    ],
)
def test_a_damaged_manifest_is_one_line(tmp_path, capsys, manifest, said):
    out = tmp_path / "senteval"
    out.mkdir()
    (out / senteval.MANIFEST).write_text(manifest)
    assert main(["get-senteval", f"out={out}", "tasks=TREC", "mirror=http://127.0.0.1:9"]) == 2
    line = one_error_line(capsys)
    assert said in line and "get-senteval.json" in line and "remove it" in line


@needs_data
def test_a_folder_laid_out_by_senteval_is_taken_as_it_is(tmp_path, capsys):
    """Files SentEval's own script wrote (here ../shared/data's copy) are recognised by their
    recorded SHA-256: nothing is fetched (the mirror is an empty folder); one changed byte and
    the task is fetched again."""
    import shutil

    out, mirror = tmp_path / "senteval", tmp_path / "empty-mirror"
    mirror.mkdir()
    for folder in ("MR", "SICK", "STS/STS14-en-test"):
        shutil.copytree(SHARED / "senteval/downstream" / folder, out / "downstream" / folder)
    command = ["get-senteval", f"out={out}", "tasks=MR,SICK,STS14", f"mirror={mirror}"]
    assert main(command) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.count("found in place") == 3
    manifest = json.loads((out / senteval.MANIFEST).read_text())
    assert sorted(manifest) == ["MR", "SICK", "STS14"] and all(
        entry["verified"] for task in manifest.values() for entry in task["files"].values()
    )
    assert main(command) == 0 and capsys.readouterr().out.count("already here") == 3
    (out / senteval.MANIFEST).unlink()
    polarity = out / "downstream/MR/rt-polarity.pos"
    polarity.write_bytes(polarity.read_bytes().replace(b"the", b"teh", 1))
    assert main(command) == 2
    said = capsys.readouterr()
    assert (
        "MR       in " in said.out and "not as recorded (downstream/MR/rt-polarity.pos: SHA-256" in said.out
    )
    assert "has no" in said.err  # MR fetched again: the mirror lacks it
