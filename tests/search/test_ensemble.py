"""Ensembles (`attncli.search.ensemble`): the search emits from the mean of the members'
next-token distributions, checked against each member run teacher-forced and averaged
in NumPy; and `attncli translate --ensemble` as a user runs it."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from attncli.search import decoding
from attncli.search.ensemble import Ensemble
from attncli.data.vocabulary import PAD, START
from small_models import SOURCES, make_model, padded, searching
from attncli_runs import attncli, run, succeeds, trained  # noqa: F401 (fixtures)

# Members of different kinds: their states and memories differ in structure, and the
# Transformer's state grows with every step.
PAIRS = {
    "rnn+rnn": ("luong-input-feeding", "bahdanau-lstm"),
    "rnn+transformer": ("luong-local-p", "transformer-pre"),
    "three": ("bahdanau-lstm", "transformer-pre", "hybrid-luong"),
}


@pytest.fixture(scope="module", params=sorted(PAIRS))
def members(request):
    return [make_model(name) for name in PAIRS[request.param]]


def teacher_forced(models, sources, tokens):
    """Each member's log p of every position given the prefix `tokens`, and its weights."""
    target_in = tf.concat([tf.fill([tokens.shape[0], 1], START), tokens[:, :-1]], axis=1)
    log_probs, weights = [], []
    for model in models:
        logits, step_weights = model((sources, target_in), return_attention_scores=True)
        log_probs.append(decoding.next_token_log_probs(logits).numpy().astype(np.float64))
        weights.append(step_weights.numpy())
    return np.stack(log_probs), np.stack(weights)


def mean_distribution(log_probs):
    """log((1/N) sum_m exp(log_probs[m])), in NumPy: the ensemble's distribution."""
    top = np.max(log_probs, axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.mean(np.exp(log_probs - safe), axis=0))


@pytest.mark.parametrize("beam_size", [1, 3])
def test_the_ensemble_emits_from_the_mean_of_its_members(members, beam_size):
    sources = padded(SOURCES)
    result = decoding.compile_search(Ensemble(members), searching(beam_size))(sources)
    for i in range(result.token_ids.shape[1]):
        tokens = result.token_ids[:, i, :]
        log_probs, weights = teacher_forced(members, sources, tokens)
        ensemble = mean_distribution(log_probs)
        for b in range(len(SOURCES)):
            length = int(result.lengths[b, i])
            emitted = tokens[b, :length].numpy()
            expected = ensemble[b, np.arange(length), emitted].sum()
            np.testing.assert_allclose(result.log_probs[b, i], expected, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(
                result.weights[b, i, :length], weights[:, b, :length].mean(axis=0),
                rtol=1e-4, atol=1e-5,
            )
            if beam_size == 1:
                np.testing.assert_array_equal(emitted, np.argmax(ensemble[b, :length], axis=-1))


def test_the_mean_is_not_one_member_alone(members):
    # The check above must be able to fail: here the members disagree somewhere, so
    # neither member's own distribution is the ensemble's.
    sources = padded(SOURCES)
    result = decoding.greedy_search(Ensemble(members), sources, searching(1))
    log_probs, _ = teacher_forced(members, sources, result.token_ids[:, 0, :])
    ensemble = mean_distribution(log_probs)
    finite = np.isfinite(ensemble)
    for member in log_probs:
        assert np.max(np.abs(member[finite] - ensemble[finite])) > 1e-3


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_model_with_itself_translates_as_it_does_alone(beam_size):
    model = make_model("transformer-pre")
    sources = padded(SOURCES)
    alone = decoding.compile_search(model, searching(beam_size))(sources)
    twice = decoding.compile_search(Ensemble([model, model]), searching(beam_size))(sources)
    np.testing.assert_array_equal(alone.token_ids, twice.token_ids)
    np.testing.assert_allclose(alone.scores, twice.scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(alone.weights, twice.weights, atol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_sentence_alone_and_in_a_batch_gives_the_same_result(members, beam_size):
    search = decoding.compile_search(Ensemble(members), searching(beam_size))
    batch = search(padded(SOURCES))
    for b, source in enumerate(SOURCES):
        alone = search(tf.constant([source]))
        steps = alone.token_ids.shape[2]
        np.testing.assert_array_equal(batch.token_ids[b, :, :steps], alone.token_ids[0])
        assert np.all(batch.token_ids[b, :, steps:].numpy() == PAD)
        np.testing.assert_allclose(batch.scores[b], alone.scores[0], rtol=1e-5)


def test_an_ensemble_needs_a_model():
    with pytest.raises(ValueError, match="at least one model"):
        Ensemble([])


# ------------------------------------------------------------- as a user runs it
SENTENCES = ["hola .", "tengo hambre .", "¿ dónde está la estación ?"]


def test_translate_with_the_same_run_twice_gives_its_own_translations(run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run, other)
    alone = succeeds(attncli("translate", run, *SENTENCES, "--format", "tsv", cwd=tmp_path))
    together = succeeds(attncli(
        "translate", run, *SENTENCES, "--format", "tsv", "--ensemble", other, cwd=tmp_path
    ))
    rows = [line.split("\t") for line in alone.stdout.splitlines()]
    rows_together = [line.split("\t") for line in together.stdout.splitlines()]
    assert [row[3] for row in rows] == [row[3] for row in rows_together]
    np.testing.assert_allclose(
        [float(row[2]) for row in rows], [float(row[2]) for row in rows_together], atol=1e-4
    )


def test_an_ensemble_of_other_vocabularies_is_refused_in_one_line(run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run, other)
    vocabulary = other / "model" / "target.vocab.txt"
    tokens = vocabulary.read_text("utf-8").splitlines()
    tokens[-1], tokens[-2] = tokens[-2], tokens[-1]  # same size, other ids
    vocabulary.write_text("\n".join(tokens) + "\n", "utf-8")
    result = attncli("translate", run, "hola .", "--ensemble", other, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert "target vocabulary differs" in line and str(other / "model") in line
    assert "Traceback" not in result.stderr
