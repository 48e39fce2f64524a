import gzip
import zipfile

import numpy as np
import pytest

from mtl.errors import UserError
from mtl.files.paths import cache_dir
from mtl.text import vectors as vectors_module
from mtl.text.vectors import load_vectors, resolve_vectors_path

GLOVE = "the 0.1 0.2 0.3\n. . . 1.0 2.0 3.0\nat&t 4 5 6\nthe 9 9 9\ndog -1e-2 0 1.5\n"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Entries are keyed by content: each test starts from an empty cache, whatever others cached."""
    monkeypatch.setenv("MTL_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def glove_txt(tmp_path):
    path = tmp_path / "glove.test.3d.txt"
    path.write_text(GLOVE, encoding="utf-8")
    return path


def test_words_with_spaces_take_the_last_dim_fields(glove_txt):
    vectors = load_vectors(glove_txt)
    assert vectors.dim == 3
    assert vectors.words == ["the", ". . .", "at&t", "dog"]
    np.testing.assert_allclose(vectors.matrix[vectors.index[". . ."]], [1.0, 2.0, 3.0])


def test_duplicate_words_keep_the_first_vector(glove_txt):
    vectors = load_vectors(glove_txt)
    np.testing.assert_allclose(vectors.matrix[vectors.index["the"]], [0.1, 0.2, 0.3])


def test_restriction_keeps_file_order(glove_txt):
    vectors = load_vectors(glove_txt, ["dog", "the", "cat"])
    assert vectors.words == ["the", "dog"]
    assert vectors.matrix.dtype == np.float32
    assert "cat" not in vectors


@pytest.mark.parametrize("kind", ["gz", "zip"])
def test_compressed_files_read_the_same(tmp_path, glove_txt, kind):
    if kind == "gz":
        path = tmp_path / "glove.txt.gz"
        path.write_bytes(gzip.compress(GLOVE.encode()))
    else:
        path = tmp_path / "glove.zip"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("glove.txt", GLOVE)
    expected, actual = load_vectors(glove_txt), load_vectors(path)
    assert actual.words == expected.words
    np.testing.assert_array_equal(actual.matrix, expected.matrix)


def test_malformed_lines_are_named_by_number(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("a 1 2 3\nb 1 2 3\nc 1 2\n")
    with pytest.raises(
        UserError,
        match=r"malformed line 3 in vectors file .*short.txt: 2 numbers, but the file's vectors have 3",
    ):
        load_vectors(short)
    not_numbers = tmp_path / "nan.txt"
    not_numbers.write_text("a 1 2 3\nb 1 x 3\n")
    with pytest.raises(UserError, match=r"malformed line 2 in vectors file .*nan.txt"):
        load_vectors(not_numbers, ["b"])


def test_unreadable_files_fail_clearly(tmp_path):
    with pytest.raises(UserError, match="does not exist: pass vectors=PATH"):
        load_vectors(tmp_path / "missing.txt")
    bad_zip = tmp_path / "bad.zip"
    bad_zip.write_bytes(b"not a zip")
    with pytest.raises(UserError, match=r"cannot read vectors file .*bad.zip"):
        load_vectors(bad_zip)
    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as archive:
        archive.writestr("a.txt", GLOVE)
        archive.writestr("b.txt", GLOVE)
    with pytest.raises(UserError, match="must hold exactly one vectors file"):
        load_vectors(two)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(UserError, match="empty or not in GloVe text format"):
        load_vectors(empty)


def test_second_restricted_load_comes_from_the_cache(glove_txt, monkeypatch):
    first = load_vectors(glove_txt, ["the", "dog"])
    read = vectors_module._read

    def fail(*args):
        raise AssertionError("the vectors file was read again")

    monkeypatch.setattr(vectors_module, "_read", fail)
    second = load_vectors(glove_txt, ["dog", "the"])
    assert second.words == first.words
    np.testing.assert_array_equal(second.matrix, first.matrix)
    # another vocabulary: its rows out of the store the first load converted, as a read gives them
    other = load_vectors(glove_txt, ["dog", "missing", "the"])
    expected = read(glove_txt, {"dog", "missing", "the"})
    assert other.words == expected.words == ["the", "dog"]
    np.testing.assert_array_equal(other.matrix, expected.matrix)


def test_cache_notices_a_changed_file(glove_txt):
    load_vectors(glove_txt, ["dog"])
    glove_txt.write_text("dog 7 7 7\n")
    np.testing.assert_allclose(load_vectors(glove_txt, ["dog"]).matrix, [[7, 7, 7]])


def test_path_resolution_order(tmp_path, glove_txt, monkeypatch):
    monkeypatch.setenv("MTL_VECTORS", str(glove_txt))
    assert resolve_vectors_path(None) == glove_txt
    assert resolve_vectors_path(str(glove_txt)) == glove_txt
    monkeypatch.delenv("MTL_VECTORS")
    (tmp_path / "data" / "glove").mkdir(parents=True)
    local = tmp_path / "data" / "glove" / "glove.6B.50d.zip"
    local.write_bytes(b"")
    monkeypatch.setenv("MTL_DATA_DIR", str(tmp_path / "data"))
    assert resolve_vectors_path(None) == local
    with pytest.raises(UserError, match="does not exist"):
        resolve_vectors_path(str(tmp_path / "nope.txt"))


def test_unreachable_download_says_how_to_point_at_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MTL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(
        UserError,
        match=r"could not download GloVe glove.840B.300d.zip from stanfordnlp/glove .*run again to resume it, "
        r"or download https://nlp.stanford.edu/data/glove.840B.300d.zip yourself and pass vectors=PATH",
    ):
        vectors_module.download_glove_840b(endpoint="http://127.0.0.1:9")  # nothing listens on port 9
    assert not (cache_dir() / "glove" / "glove.840B.300d.zip").exists()


def test_a_line_with_one_number_too_many_is_an_error_not_another_word(tmp_path):
    # Once, one GloVe line with 51 numbers silently became the word "the 0.418" and dropped 81%.
    path = tmp_path / "long.txt"
    path.write_text("a 1 2 3\nthe 0.4 1 2 3\nb 1 2 3\n")
    with pytest.raises(
        UserError, match=r"malformed line 2 in vectors file .*long.txt: 4 numbers, but .* have 3"
    ):
        load_vectors(path, ["a", "b"])


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_non_finite_values_are_refused_with_the_line_number(tmp_path, value):
    path = tmp_path / "nan.txt"
    path.write_text(f"a 1 2 3\nb 1 {value} 3\n")
    with pytest.raises(UserError, match=r"malformed line 2 in vectors file .*nan.txt: .*not finite"):
        load_vectors(path, ["b"])


def test_a_damaged_cache_entry_is_read_again_and_replaced(glove_txt):
    first = load_vectors(glove_txt, ["the", "dog"])
    entry = vectors_module._cache_file(glove_txt, {"the", "dog"})
    entry.write_bytes(entry.read_bytes()[:40])
    with pytest.warns(UserWarning, match="vector cache entry .* is damaged"):
        again = load_vectors(glove_txt, ["the", "dog"])
    np.testing.assert_array_equal(again.matrix, first.matrix)
    np.testing.assert_array_equal(load_vectors(glove_txt, ["the", "dog"]).matrix, first.matrix)  # replaced
    assert not list(entry.parent.glob("*.part"))


def test_an_unwritable_cache_warns_and_goes_on(glove_txt, tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("MTL_CACHE_DIR", str(blocked / "cache"))
    with pytest.warns(UserWarning, match="could not cache vectors .* continuing without the cache"):
        vectors = load_vectors(glove_txt, ["dog"])
    assert vectors.words == ["dog"]


def test_a_full_disk_while_caching_leaves_no_part_file(glove_txt, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    with pytest.warns(UserWarning, match="No space left on device"):
        assert load_vectors(glove_txt, ["dog"]).words == ["dog"]
    assert not list((cache_dir() / "vectors").glob("*.part"))


def test_a_byte_order_mark_does_not_take_the_first_words_vector(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + GLOVE.encode("utf-8"))
    vectors = load_vectors(path, ["the", "dog"])
    assert vectors.words == ["the", "dog"]
    np.testing.assert_allclose(vectors.matrix[0], [0.1, 0.2, 0.3])


def test_a_utf16_vectors_file_is_refused_by_name(tmp_path):
    path = tmp_path / "wide.txt"
    path.write_bytes(GLOVE.encode("utf-16"))
    with pytest.raises(UserError, match=r"vectors file .*wide.txt is UTF-16: convert it to UTF-8"):
        load_vectors(path)


def test_the_cache_is_keyed_by_content_not_by_size_and_time(glove_txt):
    import os

    load_vectors(glove_txt, ["dog"])
    stat = glove_txt.stat()
    other = GLOVE.replace("dog -1e-2 0 1.5", "dog -7e-2 0 7.5")  # same length
    assert len(other) == len(GLOVE)
    glove_txt.write_text(other, encoding="utf-8")
    os.utime(glove_txt, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as `cp -p` or `touch -r` leave it
    assert glove_txt.stat().st_size == stat.st_size and glove_txt.stat().st_mtime_ns == stat.st_mtime_ns
    np.testing.assert_allclose(load_vectors(glove_txt, ["dog"]).matrix, [[-0.07, 0, 7.5]])


def test_a_moved_copy_of_a_file_is_served_from_the_cache(glove_txt, tmp_path, monkeypatch):
    load_vectors(glove_txt, ["dog"])
    moved = tmp_path / "elsewhere.txt"
    glove_txt.rename(moved)
    monkeypatch.setattr(vectors_module, "_read", lambda *a: pytest.fail("read the file again"))
    np.testing.assert_allclose(load_vectors(moved, ["dog"]).matrix, [[-0.01, 0, 1.5]])


def test_mtl_data_dir_that_is_not_a_folder_is_named_not_downloaded_around(tmp_path, monkeypatch):
    monkeypatch.setenv("MTL_DATA_DIR", str(tmp_path / "typo"))
    monkeypatch.setattr(vectors_module, "download_glove_840b", lambda: pytest.fail("downloaded"))
    with pytest.raises(UserError, match=r"MTL_DATA_DIR=.*typo is not a folder"):
        resolve_vectors_path(None)


@pytest.mark.parametrize("files", [[], ["glove.6B.50d.txt", "glove.6B.100d.txt"]])
def test_mtl_data_dir_without_one_clear_vectors_file_asks_for_vectors(tmp_path, monkeypatch, files):
    (tmp_path / "glove").mkdir()
    for name in files:
        (tmp_path / "glove" / name).write_text(GLOVE)
    monkeypatch.setenv("MTL_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(vectors_module, "download_glove_840b", lambda: pytest.fail("downloaded"))
    found = "2 vectors files \\(glove.6B.100d.txt, glove.6B.50d.txt\\)" if files else "none"
    with pytest.raises(
        UserError, match=f"should hold one GloVe file in glove/, found {found}: pass vectors="
    ):
        resolve_vectors_path(None)


def test_an_unwritable_store_reads_the_file_once_and_still_answers(glove_txt, monkeypatch):
    reads = []
    real_read = vectors_module._read
    monkeypatch.setattr(
        vectors_module, "_read", lambda path, wanted: reads.append(path) or real_read(path, wanted)
    )
    monkeypatch.setattr(
        vectors_module, "_write_store", lambda folder, vectors: False
    )  # e.g. a read-only cache
    vectors_module._open_store.cache_clear()
    found = vectors_module.lookup(glove_txt, ["the", "not-a-word"])
    assert found.words == ["the"] and len(reads) == 1
    vectors_module._open_store.cache_clear()


def test_the_glove_download_resumes_and_is_checked(tmp_path, monkeypatch):
    """Against a local stand-in of the Hub: a download cut halfway resumes from where it stopped
    (a Range request) when run again, and a file whose SHA-256 is not the one the Hub records is
    removed with a one-line error."""
    import os

    from mtl.text import vectors

    from .hub_standin import HubStandIn

    monkeypatch.setenv("MTL_CACHE_DIR", str(tmp_path / "cache"))
    hub = HubStandIn(tmp_path / "hub")
    repo, name = vectors.GLOVE_840B_HUB
    content = os.urandom(24 << 20)  # huggingface_hub writes 10 MiB chunks: a cut at 12 MiB keeps one
    hub.files[f"{repo}/{name}"] = content
    try:
        hub.cut_next_download = True
        try:
            first = vectors.download_glove_840b(endpoint=hub.url)
        except UserError as error:  # the cut surfaced: running again resumes
            assert "run again to resume it" in str(error)
            first = vectors.download_glove_840b(endpoint=hub.url)
        assert first.read_bytes() == content and first.parent == tmp_path / "cache" / "glove"
        downloads = [request for request, _ in hub.requests if request.startswith("GET")]
        assert len(downloads) == 2 and "bytes=" in downloads[1], downloads  # the second asked for the rest
        assert 0 < int(downloads[1].split("bytes=")[1].rstrip("-")) <= len(content) // 2
        assert vectors.download_glove_840b(endpoint=hub.url) == first  # once: the next call reads the cache
        first.unlink()
        hub.recorded_sha256[f"{repo}/{name}"] = "0" * 64
        with pytest.raises(
            UserError, match=r"has SHA-256 .* not the 000000000000\.\.\. the Hub records: it was removed"
        ):
            vectors.download_glove_840b(endpoint=hub.url)
        assert not first.exists()
    finally:
        hub.close()


def test_a_word2vec_or_fasttext_header_line_is_read_past(tmp_path, glove_txt):
    """`.vec` files (word2vec's text format, fastText's) start with `<words> <dim>`; the rest is
    GloVe's format. Line numbers in errors stay the file's own."""
    vec = tmp_path / "wiki.test.vec"
    vec.write_text("4 3\n" + GLOVE, encoding="utf-8")
    read, glove = load_vectors(vec), load_vectors(glove_txt)
    assert read.words == glove.words and np.array_equal(read.matrix, glove.matrix)
    damaged = tmp_path / "damaged.vec"
    damaged.write_text("3 3\na 1 2 3\nb 4 5 6\nc 1 2\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"malformed line 4 in vectors file .*damaged.vec: 2 numbers"):
        load_vectors(damaged)
    other = tmp_path / "other.vec"  # two numbers that do not name the vectors' dimension: no header
    other.write_text("7 5\na 1 2 3\nb 4 5 6\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"malformed line 1 in vectors file .*other.vec: 1 numbers"):
        load_vectors(other)


def test_a_value_beyond_float32_is_named_with_its_word_and_line(tmp_path):
    """1e39 overflows float32 to inf: it was called "not finite" without the word."""
    path = tmp_path / "big.txt"
    path.write_text("a 1 2 3\nb 1 1e39 3\n")
    with pytest.raises(
        UserError,
        match=r"malformed line 2 in vectors file .*big.txt: 'b''s vector holds 1e\+39, beyond float32's range",
    ):
        load_vectors(path, ["b"])


def test_a_one_dimensional_files_numeric_first_word_is_no_header(tmp_path):
    """`.vec` files start `<words> <dim>`: a 1-d file's first line `7 1` is a header only where the
    file then holds 7 vectors; otherwise it is the word "7" (it was dropped)."""
    from mtl.text.vectors import _read

    path = tmp_path / "one.txt"
    path.write_text("7 1\nthe 0.5\ncat 0.25\n")
    assert _read(path, None).words == ["7", "the", "cat"]
    path.write_text("2 1\nthe 0.5\ncat 0.25\n")  # a header that counts its vectors
    assert _read(path, None).words == ["the", "cat"]
