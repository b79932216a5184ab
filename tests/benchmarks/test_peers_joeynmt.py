"""`python -m benchmarks.peers.joeynmt`: both toolkits trained side by side, the table written.

The supervisor's marks, budget signal and resumption are tested on two stand-in
trainings (small Python loops); the shared SentencePiece files against attncli's own
reading of them; and the whole command once, on the first 100 lines of Multi30k for a
few seconds of training each, in Joey NMT's real environment. That test skips where the
environment is not made yet: making it is 6 to 20 minutes of pip, more than the whole
suite may take; the benchmark's first run makes it, and the test runs from then on.
"""

import json
import os
import re
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import process_watch
import pytest
from shared_data import shared_data

from benchmarks.peers import shared_data as peers_data
from benchmarks.peers.joeynmt import DEFAULT_VENV, ready_venv
from benchmarks.peers.side_by_side import Side, Supervisor

REPO = Path(__file__).resolve().parents[2]
CORE = min(os.sched_getaffinity(0))

# A stand-in training: counts steps into a file until SIGINT or SIGTERM, continuing the
# count when resumed; prints "begun" once it trains, after a moment of "start-up".
STAND_IN = textwrap.dedent("""
    import pathlib, signal, sys, time
    out, resume = pathlib.Path(sys.argv[1]), sys.argv[2] == "resume"
    stop = []
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.append(True))
    steps = int(out.read_text()) if resume and out.exists() else 0
    time.sleep(0.3)
    print("begun", flush=True)
    while not stop:
        steps += 1
        out.with_suffix(".new").write_text(str(steps))
        out.with_suffix(".new").replace(out)  # whole, as a toolkit saves its model
        time.sleep(0.02)
    print("saved", steps, flush=True)
""")


class StandIn(Side):
    training_begun = re.compile(r"^begun$", re.M)

    def __init__(self, name, directory, budget_signal):
        super().__init__(name, CORE, directory)
        self.budget_signal = budget_signal
        self.commands = []

    @property
    def steps_file(self):
        return self.directory / "steps"

    def command(self, segment, resume):
        self.commands.append((segment, resume))
        if self.budget_signal is None:  # a side with its own budget: stops by itself
            return [sys.executable, "-c", "print('begun', flush=True)"]
        return [sys.executable, "-c", STAND_IN, self.steps_file,
                "resume" if resume else "fresh"]

    def take_kept_model(self, destination):
        if not self.steps_file.exists():
            return False
        (destination / "steps").write_text(self.steps_file.read_text())
        return True


@pytest.mark.slow
def test_the_supervisor_takes_every_mark_and_stops_each_side_its_way(tmp_path):
    signalled = StandIn("signalled", tmp_path / "a", signal.SIGINT)
    own_budget = StandIn("own", tmp_path / "b", None)
    state = Supervisor([signalled, own_budget], tmp_path / "work", budget=0.02,
                       marks=[0.01]).run()

    for name in ("signalled", "own"):
        assert state[name]["finished"]
        assert sorted(state[name]["marks"]) == ["0.01", "0.02"]
        assert [session["exit_code"] for session in state[name]["sessions"]] == [0]
    # Stopped by its SIGINT once its training clock passed the budget, not before.
    assert state["signalled"]["seconds"] >= 0.02 * 60
    assert "saved" in signalled.log_path.read_text()
    mark = state["signalled"]["marks"]["0.01"]
    assert 0.01 * 60 <= mark["seconds"] < 0.02 * 60
    assert int((Path(mark["model"]) / "steps").read_text()) > 0
    # The side that ended by itself before any mark: its final model at every mark,
    # here none (it kept nothing).
    assert state["own"]["marks"]["0.01"] == state["own"]["marks"]["0.02"]
    assert state["own"]["marks"]["0.02"]["model"] is None
    assert json.loads((tmp_path / "work" / "state.json").read_text()) == state


@pytest.mark.slow
def test_an_interrupted_run_resumes_both_sides_from_their_work(tmp_path):
    sides = [StandIn(name, tmp_path / name, signal.SIGINT) for name in ("first", "second")]
    supervisor = Supervisor(sides, tmp_path / "work", budget=0.1, marks=[])

    def stop_once_both_train():  # SIGTERM to the supervisor, as ending a session does
        while not all(side.log_path.exists() and "begun" in side.log_path.read_text()
                      for side in sides):
            time.sleep(0.1)
        time.sleep(1.5)
        os.kill(os.getpid(), signal.SIGTERM)

    stopper = threading.Thread(target=stop_once_both_train)
    stopper.start()
    with pytest.raises(SystemExit) as stopped:
        supervisor.run()
    stopper.join()
    assert stopped.value.code == 128 + signal.SIGTERM
    state = json.loads((tmp_path / "work" / "state.json").read_text())
    steps_before = {}
    for side in sides:
        record = state[side.name]
        assert not record["finished"] and len(record["sessions"]) == 1
        assert 0 < record["seconds"] < 0.1 * 60
        steps_before[side.name] = int(side.steps_file.read_text())

    again = [StandIn(name, tmp_path / name, signal.SIGINT) for name in ("first", "second")]
    state = Supervisor(again, tmp_path / "work", budget=0.1, marks=[]).run()
    for side in again:
        record = state[side.name]
        assert record["finished"] and len(record["sessions"]) == 2
        assert side.commands == [(2, True)]
        assert record["seconds"] >= 0.1 * 60
        assert int(side.steps_file.read_text()) > steps_before[side.name]


def test_both_toolkits_read_the_same_pieces(tmp_path):
    from attncli.data.tokenization import sentencepiece_vocabulary

    folder = tmp_path / "multi30k"
    folder.mkdir()
    german = ["Ein Hund läuft über die Wiese.", "Zwei Männer  spielen Fußball."]
    english = ["A dog runs across the meadow.", "Two men play soccer."]
    for split in peers_data.SPLITS:
        (folder / f"{split}.de").write_text("\n".join(german * 20) + "\n")
        (folder / f"{split}.en").write_text("\n".join(english * 20) + "\n")
    shared = peers_data.prepare(folder, tmp_path / "data", limit=30, vocab_size=60)

    model = shared.sentencepiece_model.read_bytes()
    pieces = shared.pieces.read_text("utf-8").splitlines()
    # attncli's vocabulary of the model is the reserved tokens, then Joey's voc_file.
    assert sentencepiece_vocabulary(model).tokens[4:] == pieces
    assert shared.lines("train", "de") == (german * 15)
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    for line in german + english:  # the text comes back as written, spaces included
        assert processor.decode(processor.encode(line, out_type=str)) == line
    assert shared.target_tokens() == sum(len(processor.encode(line)) + 1
                                         for line in english * 15)
    with pytest.raises(SystemExit, match="prepared with"):
        peers_data.prepare(folder, tmp_path / "data", limit=None, vocab_size=60)


@pytest.mark.slow
def test_the_command_trains_both_and_writes_the_table(tmp_path):
    data = shared_data("multi30k").parent
    if ready_venv(DEFAULT_VENV) is None:
        # Making it is 6 to 20 minutes of pip: more than the whole suite may take.
        pytest.skip(f"Joey NMT's environment is not made at {DEFAULT_VENV}: "
                    "python -m benchmarks.peers.joeynmt makes it on its first run")
    work = tmp_path / "work"
    done = process_watch.run(
        [sys.executable, "-m", "benchmarks.peers.joeynmt", "--pairing", "recurrent",
         "--minutes", "0.2", "--limit", "30", "--vocab-size", "1000",
         "--cores", f"{CORE},{CORE}", "--data", data, "--work-dir", work],
        cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 0, done.stderr[-3000:]

    state = json.loads((work / "state.json").read_text())
    for toolkit in ("attncli", "joeynmt"):
        assert state[toolkit]["finished"]
        kept = state[toolkit]["marks"]["0.2"]["model"]
        assert kept is not None and any(Path(kept).iterdir())
        for beam in (1, 5):
            output = work / "marks" / "0.2" / f"{toolkit}.beam{beam}.txt"
            assert len(output.read_text("utf-8").splitlines()) == 30
    table = (work / "results.md").read_text()
    assert table.strip() == done.stdout.strip()
    for toolkit in ("attncli", "joeynmt"):
        assert re.search(rf"^\| 0\.2 \| {toolkit} \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$",
                         table, re.M)
        # Steps and the target tokens they trained, read from each toolkit's own log. On a
        # loaded machine 0.2 minutes may end before Joey's first step: then both are 0.
        steps, tokens = re.search(rf"^\| {toolkit} \| ([\d,]+) \| ([\d,]+) \|", table,
                                  re.M).groups()
        assert (steps == "0") == (tokens == "0"), (toolkit, steps, tokens)
    assert re.search(r"^\| attncli \| [1-9]", table, re.M)
