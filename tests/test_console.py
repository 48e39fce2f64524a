"""Messages and progress bars on one terminal: a line written while a bar is drawn starts on a
line of its own (the bar cleared first, drawn again below it), never in the middle of the bar."""

import io
import re
import sys

import pytest
from tqdm.auto import tqdm

from mtl import console


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def start_of_line_before(text: str, message: str) -> str:
    """What stands on the screen line before `message` (after the last carriage return or newline)."""
    return re.split(r"[\r\n]", text[: text.index(message)])[-1]


@pytest.fixture
def screen(monkeypatch):
    """stderr and stdout both a terminal, as a person's shell has them, a bar drawn on stderr.
    (A function the test calls: pytest sets its own sys.stderr again when a test's body starts.)"""
    bars = []

    def draw():
        err, out = Terminal(), Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        bars.append(tqdm(total=10, desc="train", file=console.progress_stream(), mininterval=0))
        bars[-1].update(3)
        return err, out, bars[-1]

    yield draw
    for bar in bars:
        bar.close()


def test_say_clears_the_bar_before_its_line(screen):
    err, _, bar = screen()
    console.say("step 20: nli/dev/acc 50.00")
    assert start_of_line_before(err.getvalue(), "step 20") == ""


def test_a_bar_written_to_through_another_progress_stream_is_cleared(screen):
    err, _, bar = screen()
    bar.write("  sweep-a: finished", file=console.progress_stream())  # a new wrapper object each call
    assert start_of_line_before(err.getvalue(), "  sweep-a") == ""


def test_printed_lines_wait_for_their_end_and_go_above_the_bar(screen):
    err, out, bar = screen()
    stdout = console.Printable(out)
    print("trainable parameters: 8,261", file=stdout)  # print writes the text, then its newline
    assert out.getvalue() == "trainable parameters: 8,261\n"
    # the bar was cleared (spaces over it) before the line, and drawn again after
    assert re.search(r"\r +\r", err.getvalue()) and err.getvalue().endswith("it/s]")
    print("no end yet", end="", file=stdout, flush=True)  # asked for now: written now
    assert out.getvalue().endswith("no end yet")


def test_the_bar_is_drawn_again_below_the_message(screen):
    err, _, bar = screen()
    console.say("a message")
    after = err.getvalue().split("a message\n", 1)[1]
    assert "train:  30%" in after
