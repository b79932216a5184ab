"""The result scripts of benchmarks/ report a finished run (`--reuse`) as a table."""

import json
import re
import sys
from pathlib import Path

import process_watch
import pytest

REPO = Path(__file__).resolve().parents[2]


def finished_run(path, test):
    path.mkdir()
    records = [
        {"epoch": 1, "step": 100, "minutes": 60.2, "best": True},
        {"epoch": 2, "step": 200, "minutes": 119.6, "best": False},
    ]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (path / "test.json").write_text(json.dumps(test))
    return path


def benchmark(script, *args):
    """`python -m benchmarks.SCRIPT ARGS`, waiting as long as it works (`process_watch`)."""
    return process_watch.run([sys.executable, "-m", f"benchmarks.{script}", *map(str, args)],
                             cwd=REPO)


def report(script, run):
    return benchmark(script, "--reuse", "--run-dir", run)


def test_g2p_table_puts_the_run_beside_the_published_rows(tmp_path):
    run = finished_run(tmp_path / "g2p", {
        "per": 6.125, "wer": 26.5, "words": 12000, "decoding": {"beam_size": 5},
    })
    result = report("cmudict_g2p", run)
    assert result.returncode == 0, result.stderr
    assert "| Yao & Zweig 2015, bi-LSTM encoder-decoder | 5.45 | 23.55 |" in result.stdout
    assert "**6.12** | **26.50** |" in result.stdout
    assert "trained 120 minutes (2 evaluations, 200 steps); kept epoch 1 (step 100)" in (
        result.stdout
    )


def test_multi30k_table_has_cased_and_lowercased_bleu(tmp_path):
    run = finished_run(tmp_path / "m30k", {
        "bleu": 36.04, "bleu_lowercase": 37.51, "chrf": 60.0, "sentences": 1000,
        "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "decoding": {"beam_size": 5, "alpha": 0.6},
    })
    result = report("multi30k_de_en", run)
    assert result.returncode == 0, result.stderr
    assert "**36.0** | **37.5** | 60.0 |" in result.stdout
    assert "case:mixed" in result.stdout


@pytest.mark.parametrize("script", ["cmudict_g2p", "multi30k_de_en"])
def test_an_unfinished_run_and_a_finished_one_without_reuse(tmp_path, script):
    (tmp_path / "run").mkdir()
    result = report(script, tmp_path / "run")
    assert result.returncode == 1 and "has not finished" in result.stderr
    run = finished_run(tmp_path / "done", {"decoding": {}})
    result = benchmark(script, "--run-dir", run)
    assert result.returncode == 1 and "holds a finished run" in result.stderr


def test_every_benchmark_command_in_the_docs_runs_a_module_of_the_package():
    """benchmarks/ is a package run as `python -m benchmarks.NAME`, never as a file path."""
    assert (REPO / "benchmarks" / "__init__.py").is_file()
    documents = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
                 *sorted((REPO / "benchmarks").glob("*.py"))]
    named = set()
    for document in documents:
        text = document.read_text(encoding="utf-8")
        assert not re.search(r"python3? benchmarks/", text), document.name
        assert "sys.path.insert" not in text, document.name
        named.update(re.findall(r"python3? -m benchmarks\.([a-z0-9_]+(?:\.[a-z0-9_]+)*)", text))
    assert named, "no benchmark command found"
    for name in sorted(named):
        assert (REPO / "benchmarks" / f"{name.replace('.', '/')}.py").is_file(), name


def test_g2p_seeds_are_reported_alone_and_as_their_ensemble(tmp_path):
    """`--seeds` reports each seed's run and the ensemble's figures in RUN/ensemble.json."""
    (tmp_path / "runs").mkdir()
    for seed, (per, wer) in {0: (5.8, 24.5), 1: (5.9, 24.75)}.items():
        finished_run(tmp_path / "runs" / f"seed-{seed}", {
            "per": per, "wer": wer, "words": 12000, "decoding": {"beam_size": 5},
        })
    (tmp_path / "runs" / "ensemble.json").write_text(json.dumps(
        {"per": 5.25, "wer": 22.5, "words": 12000, "runs": ["seed-0", "seed-1"]}))
    result = benchmark("cmudict_g2p", "--reuse", "--seeds", "0", "1",
                       "--run-dir", tmp_path / "runs")
    assert result.returncode == 0, result.stderr
    assert "| attncli (`configs/cmudict-g2p.yaml`), seed 0 | 5.80 | 24.50 |" in result.stdout
    assert "| attncli (`configs/cmudict-g2p.yaml`), seed 1 | 5.90 | 24.75 |" in result.stdout
    assert "| **attncli, ensemble of the 2** | **5.25** | **22.50** |" in result.stdout
    assert "seed 1: trained 120 minutes" in result.stdout


@pytest.mark.parametrize("seeds", [["3", "3"], ["3"]])
def test_a_seed_given_twice_or_alone_is_refused(tmp_path, seeds):
    result = benchmark("cmudict_g2p", "--seeds", *seeds, "--run-dir", tmp_path / "runs")
    assert result.returncode == 2 and "give two or more seeds, each once" in result.stderr


@pytest.mark.slow
def test_g2p_seeds_train_side_by_side_and_decode_as_one(tmp_path):
    """Two tiny G2P runs trained by the script, then their ensemble scored on the test split.

    Each seed's run is trained with its own seed, and the ensemble's figures are decoded
    from the two kept models (what the ensemble computes is checked in test_ensemble.py).
    """
    from tests.shared_data import shared_data

    data = shared_data("cmudict/g014b2b.train").parents[1]
    runs = tmp_path / "runs"
    result = benchmark(
        "cmudict_g2p", "--seeds", "0", "1", "--data", data, "--run-dir", runs,
        "--set", "data.limit=400", "--set", "model.units=16", "--set", "model.embedding_dim=8",
        "--set", "model.encoder_layers=1", "--set", "training.epochs=1",
        "--set", "training.eval_sentences=20", "--set", "decoding.beam_size=2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for seed in (0, 1):
        config = (runs / f"seed-{seed}" / "config.yaml").read_text("utf-8")
        assert re.search(rf"\bseed: {seed}\b", config), config
    ensemble = json.loads((runs / "ensemble.json").read_text("utf-8"))
    assert ensemble["runs"] == ["seed-0", "seed-1"] and 0 < ensemble["words"] <= 400
    assert 0.0 <= ensemble["per"] <= 100.0 and 0.0 <= ensemble["wer"] <= 100.0
    assert f"| **attncli, ensemble of the 2** | **{ensemble['per']:.2f}** |" in result.stdout
    assert "taskset -c" in result.stderr
