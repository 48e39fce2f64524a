"""A study's members forked from one process that imported the trainer once: each is still a
process of its own (exit status, signals, output), trains to the same bits as a run started from
nothing, and a server that cannot serve leaves each member a fresh process."""

import os
import signal
import threading
import time

import pytest

from mtl import member_server
from mtl.errors import UserError
from mtl.jobs import forkserver, local
from mtl.jobs.member import Member
from tests.conftest import args_for, start_run
from tests.test_training import exported_weights


@pytest.fixture(scope="module")
def server():
    started = forkserver.ForkServer(dict(os.environ))
    yield started
    started.close()


def test_a_forked_member_trains_to_the_bits_of_a_run_of_its_own(tiny_data, tmp_path, server):
    forked = server.start(["train-multitask", *args_for(tiny_data, tmp_path / "forked", "max_steps=4")], None)
    assert forked.wait() == 0 and forked.pid != os.getpid()
    start_run(tiny_data, tmp_path / "here", "max_steps=4")
    a, b = exported_weights(tmp_path / "forked"), exported_weights(tmp_path / "here")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_a_forked_member_has_its_exit_status_its_signals_and_its_log(tiny_data, tmp_path, server):
    log = tmp_path / "refused.log"
    refused = server.start(["train-multitask", *args_for(tiny_data, tmp_path / "x"), "no_such_key=1"], log)
    assert refused.wait() == 2
    assert "no_such_key" in log.read_text()  # the member's output went to its log, as with parallel=
    training = server.start(
        ["train-multitask", *args_for(tiny_data, tmp_path / "long", "max_steps=100000")], None
    )
    time.sleep(0.5)
    assert training.poll() is None
    assert (
        os.getsid(training.pid) == training.pid
    )  # a session of its own: the terminal's Ctrl-C is the study's
    training.send_signal(signal.SIGKILL)
    assert training.wait() == -signal.SIGKILL  # as Popen says a process killed by a signal


def test_a_server_that_cannot_serve_leaves_each_member_a_process_of_its_own(
    tiny_data, tmp_path, monkeypatch, capsys
):
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert member_server.unsafe_to_fork() == "a thread is running after the imports"
    finally:
        stop.set()
        thread.join()

    def cannot(env):
        raise OSError("the fork server cannot serve: a thread is running after the imports")

    monkeypatch.setattr(local, "ForkServer", cannot)
    member = Member("bad", [*args_for(tiny_data, tmp_path / "bad"), "no_such_key=1"], tmp_path / "bad")
    assert local.run_local([member], 1, tmp_path, "study") == {"bad": "failed (exit 2)"}
    assert "fork server" not in capsys.readouterr().out  # an internal matter, not the user's


def test_a_server_gone_mid_study_is_one_line_that_says_to_run_again(tiny_data, tmp_path):
    gone = forkserver.ForkServer(dict(os.environ))
    gone.process.kill()
    with pytest.raises(
        UserError, match=r"the study's fork server ended \(exit -9\): run the same command again"
    ):
        gone.start(["train-multitask", *args_for(tiny_data, tmp_path / "run")], None)
    gone.close()
