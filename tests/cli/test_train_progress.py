"""What `attncli train` writes on stderr when it is not a terminal, and its summary's epochs."""

import io
import json
import re

import pytest
from rich.console import Console

from attncli.cli.progress import TrainingDisplay
from attncli_runs import TINY, attncli, succeeds

LINE = re.compile(r"^\[\d+:\d\d:\d\d\] ")


def display(terminal, log_every=10):
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=200)
    return TrainingDisplay(console, log_every=log_every), out


def record(epoch, complete):
    return {"epoch": epoch, "complete_epoch": complete, "step": 25, "train_loss": 1.0,
            "valid_loss": 2.0, "best": True, "minutes": 0.5}


def test_plain_lines_per_stage_and_every_n_batches():
    shown, out = display(terminal=False)
    with shown:
        shown.stage("learning the vocabularies")
        shown.start_epoch(1, 3, 0)
        for _ in range(25):
            shown.step(2.5, 1234.0)
        shown.end_epoch(record(1, True))
        shown.start_epoch(2, 3, 0)
        for _ in range(10):
            shown.step(1.5, 99.0)
    lines = out.getvalue().splitlines()
    stamped = [LINE.sub("", line) for line in lines if LINE.match(line)]
    assert stamped == [
        "learning the vocabularies",
        "training epoch 1 of 3",
        "epoch 1 batch 10: loss 2.500, 1,234 target tokens/s",
        "epoch 1 batch 20: loss 2.500, 1,234 target tokens/s",
        "training epoch 2 of 3",
        # The first epoch counted the batches of one.
        "epoch 2 batch 10/25: loss 1.500, 99 target tokens/s",
    ]
    assert any(line.split()[:2] == ["1", "25"] for line in lines)  # the table's row


def test_a_resumed_epoch_counts_on_from_its_batch():
    shown, out = display(terminal=False, log_every=5)
    with shown:
        shown.start_epoch(2, 3, 8)
        for _ in range(2):
            shown.step(1.0, 10.0)
    stamped = [LINE.sub("", line) for line in out.getvalue().splitlines()]
    assert stamped == ["training epoch 2 of 3 from batch 9",
                       "epoch 2 batch 10: loss 1.000, 10 target tokens/s"]


def test_a_terminal_gets_a_spinner_and_bars_not_lines():
    shown, out = display(terminal=True)
    with shown:
        shown.stage("learning the vocabularies")
        assert shown.status is not None  # the stage is a spinner's text
        shown.start_epoch(1, 3, 0)
        assert shown.status is None  # gone when training starts
        for _ in range(25):
            shown.step(2.5, 1234.0)
    assert "learning the vocabularies" in out.getvalue()
    assert not any(LINE.match(line) for line in out.getvalue().splitlines())
    assert "batch 10:" not in out.getvalue()


@pytest.mark.slow
def test_train_to_a_file_tells_each_stage_and_counts_a_cut_epoch(tmp_path):
    # A budget of 1.2 s cuts the first epoch: it is spent after the first batch starts,
    # whose step is traced then (seconds of CPU: the epoch cannot fit in 1.2 s), and not
    # before, a millisecond of CPU after the budget starts (a budget of 60 ms was spent
    # there on a loaded core: no epoch at all). A line a batch until the budget is spent;
    # the table shows `1*` at the last, and the summary one epoch. No test split: scoring
    # it is not what is tested.
    result = succeeds(attncli(
        "train", TINY, "--run-dir", tmp_path / "run", "--set", "training.max_minutes=0.02",
        "--set", "training.log_every=1", "--set", "data.test_size=0", cwd=tmp_path,
    ))
    stamped = [LINE.sub("", line) for line in result.stderr.splitlines() if LINE.match(line)]
    assert stamped[:5] == [
        "reading the data", "learning the vocabularies", "building the model",
        "encoding the pairs", "training epoch 1 of 2",
    ]
    batches = stamped[5:]
    assert batches, stamped
    for number, line in enumerate(batches, start=1):
        assert re.fullmatch(rf"epoch 1 batch {number}: loss \d+\.\d{{3}}, [\d,]+ target tokens/s",
                            line), line
    assert re.search(rf"^\s+1\*\s+{len(batches)}\s", result.stderr, re.MULTILINE)
    summary = json.loads(result.stdout)
    assert summary["last"]["epoch"] == 1 and not summary["last"]["complete_epoch"]
    assert summary["epochs"] == 1
