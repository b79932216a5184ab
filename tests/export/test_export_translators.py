"""The translators whose traces `attncli export` writes are those it checks the export
against: each signature's must search as `attncli translate` would with the same options,
or the check would compare the export with the wrong translations and pass."""

from spa_eng_parts import REPO

from attncli.cli.runs import model_directory
from attncli.config.search import Decoding, Sampling
from attncli.search.ensemble import load_ensemble
from attncli.search.serving import INPUTS, signature_decodings, signature_translators

FIXTURE_RUN = REPO / "tests" / "fixtures" / "run-0.1.0"


def configuration(translator):
    return (translator.model, translator.source_tokenizer, translator.target_tokenizer,
            translator.search_config, translator.source_end, translator.attention_weights,
            translator.sampling, translator.settings)


def test_each_signature_searches_as_translate_would():
    loaded = load_ensemble([model_directory(FIXTURE_RUN)])
    greedy = loaded.search.adjusted(beam_size=1, alpha=0.2)
    beam = loaded.search.adjusted(beam_size=3, alpha=0.2, n_best=2)
    drawing = Sampling.parse("topk:10", 0.8)
    translators = signature_translators(
        loaded.model, loaded.source_tokenizer, loaded.target_tokenizer,
        signature_decodings(greedy, beam, drawing), source_end=loaded.source_end,
    )
    expected = {"greedy": loaded.translator(greedy, attention_weights=False),
                "beam": loaded.translator(beam, attention_weights=False),
                "sample": loaded.translator(Decoding(greedy, drawing), attention_weights=False)}
    assert {name.removesuffix("_prefix") for name in INPUTS} == set(translators)
    assert {name: configuration(translator) for name, translator in translators.items()} == {
        name: configuration(translator) for name, translator in expected.items()}
