"""Model directories: what is read back translates identically, in a fresh process
(the SavedModel export is tested in test_export.py)."""

import json
import os
import subprocess
import sys

import pytest

from spa_eng_parts import REPO, SENTENCES, model_and_tokenizers

from attncli.model import saving
from attncli.config.search import SearchConfig
from attncli.search.translation import Translator

BEAM = SearchConfig(beam_size=3, n_best=3, max_length_ratio=1.0, max_length_offset=4)
GREEDY = SearchConfig(beam_size=1, max_length_ratio=1.0, max_length_offset=4)


# A small Transformer: self-attention on both sides, post-norm, learned positions,
# cross-attention with the general score.
TRANSFORMER = dict(
    encoder="self-attention", decoder="self-attention", encoder_layers=2, decoder_layers=2,
    heads=2, norm="post", position_encoding="learned", max_positions=20, score="general",
)


@pytest.fixture(scope="module")
def parts():
    return model_and_tokenizers()


@pytest.fixture(scope="module", params=["rnn", "transformer"])
def any_parts(request):
    return model_and_tokenizers(**(TRANSFORMER if request.param == "transformer" else {}))


def summary(translations):
    """Plain data of `Translator.translate` results, exact floats as text."""
    return [
        [
            [hypothesis.text, repr(hypothesis.score), hypothesis.weights.tolist()]
            for hypothesis in translation.hypotheses
        ]
        for translation in translations
    ]


LOAD_AND_TRANSLATE = """
import json, sys
from attncli.model import saving
from attncli.config.search import SearchConfig
loaded = saving.load_model(sys.argv[1])
results = {}
for name, settings in json.loads(sys.argv[2]).items():
    translations = loaded.translator(SearchConfig(**settings)).translate(json.loads(sys.argv[3]))
    results[name] = [
        [[h.text, repr(h.score), h.weights.tolist()] for h in t.hypotheses] for t in translations
    ]
print(json.dumps({"results": results, "metadata": loaded.metadata}))
"""


@pytest.mark.slow
def test_a_saved_model_translates_identically_in_a_fresh_process(any_parts, tmp_path):
    parts = any_parts
    model, source_tokenizer, target_tokenizer = parts
    directory = tmp_path / "model"
    saving.save_model(
        directory, model, source_tokenizer, target_tokenizer, metadata={"epochs": 0}
    )
    assert sorted(path.name for path in directory.iterdir()) == [
        "config.json", "model.weights.h5", "source.tokenizer.json", "source.vocab.txt",
        "target.tokenizer.json", "target.vocab.txt",
    ]
    expected = {
        name: summary(Translator(model, *parts[1:], search).translate(SENTENCES))
        for name, search in (("greedy", GREEDY), ("beam", BEAM))
    }
    settings = {"greedy": GREEDY.to_dict(), "beam": BEAM.to_dict()}
    completed = subprocess.run(
        [sys.executable, "-c", LOAD_AND_TRANSLATE, str(directory), json.dumps(settings),
         json.dumps(SENTENCES)],
        cwd=REPO, capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    output = json.loads(completed.stdout)
    assert output["metadata"] == {"epochs": 0}
    assert output["results"] == expected


def test_saving_over_a_model_replaces_it_whole(parts, tmp_path):
    model, source_tokenizer, target_tokenizer = parts
    directory = tmp_path / "model"
    saving.save_model(directory, model, source_tokenizer, target_tokenizer, metadata={"run": 1})
    (directory / "stale.txt").write_text("from an older save")
    saving.save_model(directory, model, source_tokenizer, target_tokenizer, metadata={"run": 2})
    assert not (directory / "stale.txt").exists()
    assert saving.load_model(directory).metadata == {"run": 2}
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_a_failed_save_leaves_the_previous_model_untouched(parts, tmp_path):
    model, source_tokenizer, target_tokenizer = parts
    directory = tmp_path / "model"
    saving.save_model(directory, model, source_tokenizer, target_tokenizer, metadata={"run": 1})
    before = {path.name: path.read_bytes() for path in directory.iterdir()}
    with pytest.raises(TypeError):
        saving.save_model(
            directory, model, source_tokenizer, target_tokenizer, metadata={"bad": object()}
        )
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == before
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_loading_what_is_not_a_model_is_a_one_line_error(tmp_path):
    with pytest.raises(saving.ModelFileError, match="no config.json") as missing:
        saving.load_model(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(saving.ModelFileError, match="not an attncli model") as other:
        saving.load_model(tmp_path)
    for error in (missing, other):
        assert "\n" not in str(error.value)

