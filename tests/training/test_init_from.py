"""Fine-tuning: `attncli train CONFIG --init-from RUN` starts from the model RUN kept."""

import json
import shutil

import numpy as np
import pytest

from attncli.config.run import load_run_config
from attncli.config.shipped import resolve_config
from attncli.errors import AttncliError
from attncli.training.init_from import check_init_from
from tests.attncli_runs import (  # noqa: F401  trained is a fixture
    TINY, attncli, build_finetuning, in_process, succeeds_here, train_before_tensorflow, trained,
)

VOCABULARY_FILES = ("source.tokenizer.json", "source.vocab.txt",
                    "target.tokenizer.json", "target.vocab.txt")


def assert_weights_of(model, model_dir):
    from attncli.search.loading import load_model

    kept = load_model(model_dir).model
    # The paths below the model's own name (`seq2_seq/...`, `seq2_seq_1/...`).
    assert [w.path.split("/", 1)[1] for w in model.weights] == [
        w.path.split("/", 1)[1] for w in kept.weights
    ]
    for ours, theirs in zip(model.weights, kept.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_the_new_run_starts_from_the_kept_weights_with_a_fresh_optimizer(trained, tmp_path):
    parts, recorder = build_finetuning(trained, tmp_path / "ft")
    assert_weights_of(parts.model, trained / "model")
    assert int(parts.optimizer.iterations.numpy()) == 0
    assert all(not np.any(v.numpy()) for v in parts.optimizer.variables[1:]
               if "momentum" in v.path or "velocity" in v.path)
    [said] = [m for m in recorder.messages if m.startswith("initialised from")]
    assert "optimizer starts fresh" in said and "schedule at step 0" in said
    for name in VOCABULARY_FILES:
        assert (tmp_path / "ft" / name).read_bytes() == (trained / "model" / name).read_bytes()
    record = json.loads((tmp_path / "ft" / "init_from.json").read_text())
    assert record["run"] == str(trained.resolve())
    assert record["metadata"]["epoch"] == 1


def test_a_run_killed_before_its_first_checkpoint_starts_from_run_again(trained, tmp_path):
    build_finetuning(trained, tmp_path / "ft")  # the run is made, then nothing is trained
    parts, recorder = build_finetuning(trained, tmp_path / "ft", resume=True)
    assert "no checkpoint yet: starting this run from the beginning" in recorder.messages
    assert any(m.startswith("initialised from") for m in recorder.messages)
    assert_weights_of(parts.model, trained / "model")


@pytest.mark.slow
def test_fine_tune_then_resume_continues_the_run_itself(trained, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train = ("train", TINY, "--set", "training.epochs=1", "--set", "training.learning_rate=0.001")
    result = succeeds_here(in_process(*train, "--run-dir", "ft", "--init-from", trained))
    assert "initialised from" in result.stderr and "optimizer starts fresh" in result.stderr
    kept = json.loads((tmp_path / "ft" / "model" / "config.json").read_text())
    assert kept["metadata"]["init_from"] == str(trained.resolve())
    assert "initialised from" in (tmp_path / "ft" / "train.log").read_text()

    resumed = succeeds_here(in_process("train", "--resume", "--run-dir", "ft",
                                       "--init-from", trained, "--set", "training.epochs=2"))
    assert "resuming from" in resumed.stderr
    assert "initialised from" not in resumed.stderr
    steps = [json.loads(line)["step"] for line in
             (tmp_path / "ft" / "metrics.jsonl").read_text().splitlines()]
    assert steps[1] == 2 * steps[0]

    other = tmp_path / "other"
    shutil.copytree(trained, other)
    refused = in_process("train", "--resume", "--run-dir", "ft", "--init-from", other)
    assert refused.exit_code == 2
    [line] = refused.stderr.strip().splitlines()
    assert line.endswith(f"--init-from: ft started from {trained.resolve()}, not {other}; "
                         "drop --init-from to resume it")


@pytest.mark.parametrize(("override", "named"), [
    ("model.units=16", "model.units is 16 here but 32 in"),
    ("model.score=dot", "model.score is 'dot' here but 'general' in"),
    ("model.cell=lstm", "model.cell is 'lstm' here but 'gru' in"),
    ("data.source.lowercase=false", "data.source.lowercase is False here but True in"),
    ("data.target.vocab_size=300", "data.target.vocab_size is 300 here but 400 in"),
    ("data.source_end=true", "data.source_end is True here but False in"),
])
def test_a_different_model_or_vocabulary_is_named(trained, override, named):
    with pytest.raises(AttncliError, match="^--init-from: ") as error:
        check_init_from(trained, load_run_config(TINY, [override]))
    assert named in str(error.value)


def test_dropout_may_change(trained):
    config = load_run_config(TINY, ["model.dropout=0.3", "training.learning_rate=0.0001",
                                    "data.batch_size=8", "data.limit=100"])
    assert check_init_from(trained, config).model_dir == (trained / "model").resolve()


def test_the_refusal_is_one_line_before_tensorflow(trained, tmp_path):
    result = train_before_tensorflow(TINY, "--set", "model.units=64", "--init-from", trained,
                                     "--run-dir", tmp_path / "ft", cwd=tmp_path)
    lines = result.stdout.strip().splitlines()
    assert lines[-2:] == ["EXIT 2", "HEAVY []"]
    assert result.stderr.count("\n") == 1 and "model.units is 64 here but 32" in result.stderr
    assert not (tmp_path / "ft").exists()


@pytest.mark.parametrize(("damage", "named"), [
    (lambda run: (run / "model" / "model.weights.h5").unlink(),
     "model/model.weights.h5 is missing"),
    (lambda run: (run / "model" / "target.vocab.txt").unlink(),
     "model/target.vocab.txt is missing"),
    (lambda run: shutil.rmtree(run / "model"), "model/config.json is missing"),
    (lambda run: (run / "config.yaml").unlink(), "config.yaml is missing"),
    (lambda run: (run / "config.yaml").write_text("model: {units: -1}\n"),
     "config.yaml is damaged"),
    (lambda run: (run / "model" / "config.json").write_text("{"), "model/config.json"),
    (lambda run: (run / "run.json").unlink(), "is not an attncli run directory"),
])
def test_a_damaged_run_is_named(trained, tmp_path, damage, named):
    run = tmp_path / "base"
    shutil.copytree(trained, run)
    damage(run)
    with pytest.raises(AttncliError) as error:
        check_init_from(run, load_run_config(TINY))
    assert named in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_damaged_weights_are_named(trained, tmp_path):
    run = tmp_path / "base"
    shutil.copytree(trained, run)
    (run / "model" / "model.weights.h5").write_bytes(b"not hdf5")
    result = attncli("train", TINY, "--init-from", run, "--run-dir", "ft", cwd=tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()[-1:]
    weights = (run / "model" / "model.weights.h5").resolve()
    assert line.startswith(f"Error: cannot read the weights {weights} (")
    assert not (tmp_path / "ft").exists()


def test_the_new_run_cannot_be_run_itself(trained, tmp_path):
    base = tmp_path / "base"
    shutil.copytree(trained, base)
    result = attncli("train", TINY, "--init-from", "base", "--run-dir", base, "--overwrite",
                     cwd=tmp_path)
    assert result.returncode == 2
    assert "is the run to be written" in result.stderr
    assert (base / "model" / "model.weights.h5").is_file()


def test_a_side_left_at_its_defaults_is_run_s(trained, tmp_path, capsys):
    """A config that says nothing of a side's tokenization fine-tunes with RUN's (and
    says so); a side it sets is compared, not taken."""
    import yaml

    from attncli.cli.train_command import resolve_run
    from attncli.training.init_from import take_tokenization

    mapping = yaml.safe_load(resolve_config(TINY).read_text())
    del mapping["data"]["source"], mapping["data"]["target"]
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(mapping))
    run_sides = load_run_config(TINY).data
    config, taken = take_tokenization(trained, load_run_config(path))
    assert taken == ["data.source", "data.target"]
    assert (config.data.source, config.data.target) == (run_sides.source, run_sides.target)
    check_init_from(trained, config)
    _, taken = take_tokenization(trained, load_run_config(path, ["data.source.vocab_size=300"]))
    assert taken == ["data.target"]

    config, run, _ = resolve_run(path, [], run_dir=tmp_path / "ft", data_dir=None,
                                 resume=False, overwrite=False, init_from=trained)
    run.unlock()
    assert config.data.source == run_sides.source
    assert "data.source and data.target left at the defaults, so taken from RUN" in (
        capsys.readouterr().err)
    assert load_run_config(run.config_path).data.target == run_sides.target
