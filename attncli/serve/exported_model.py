"""A CTranslate2 export served (`attncli serve DIR --engine ctranslate2`), without
TensorFlow: `attncli.export.ctranslate2_engine.ExportedTranslator` behind the server's
`ServedModel`.

Its translations are those of `attncli translate DIR --engine ctranslate2` (greedy search
is attncli's, token for token; beam search is CTranslate2's, ranked by attncli's score:
docs/export.md). What the engine cannot give is refused in one line (422), before
anything is translated:

- sampling: CTranslate2 draws from one random generator per process, so a request's
  `seed` could not give a text the same draws whatever else is in its batch;
- `token_log_probs`: CTranslate2 returns a translation's `log P`, not each token's;
- `/inspect` and `/step`: CTranslate2 returns one attention, the last block's
  cross-attention averaged over its heads (the `weights` of `/translate` with
  `"attention": true`, equal to the TensorFlow model's), not every attention, layer and
  head, nor a step's query, keys and values.
"""

from attncli.config.search import Decoding
from attncli.serve.limits import RequestError
from attncli.serve.served_model import TRANSLATE_BATCH, ServedModel

#: The end of each refusal: what to do instead.
WITH_TENSORFLOW = "serve the run itself (attncli serve RUN, the TensorFlow engine)"


class ExportedModel(ServedModel):
    """A CTranslate2 export served by name (see the module).

    Args:
        name: the name requests use (`"model": name`).
        translator: the export's `ExportedTranslator`, with its own decoding settings.
        limits: the server's `Limits`.
    """

    engine = "ctranslate2"
    inspect_refusal = (
        "the attention view (/inspect, /step) is not available with the ctranslate2 "
        "engine: CTranslate2 returns one attention, the last block's cross-attention "
        "averaged over its heads (/translate with \"attention\": true), not every "
        "attention, layer and head, nor a step's query, keys and values; to see them, "
        f"{WITH_TENSORFLOW}"
    )

    def __init__(self, name, translator, limits):
        super().__init__(name, limits, translator.exported_search,
                         (translator.source_tokenizer.level, translator.target_tokenizer.level))
        self.exported = translator

    @classmethod
    def load(cls, name, directory, limits, compute_type="float32"):
        """The export in `directory`, its weights loaded as `compute_type`."""
        from attncli.export.ctranslate2_engine import ExportedTranslator

        return cls(name, ExportedTranslator(directory, compute_type), limits)

    def decoding(self, beam=None, alpha=None, n_best=None, prefix=None, sampling=None,
                 temperature=None, seed=None, token_log_probs=False):
        if sampling is not None:
            raise RequestError(
                422, "sampling is not available with the ctranslate2 engine: CTranslate2 "
                "draws from one random generator per process, so a seed could not give a "
                f"text the same draws in every batch; to sample, {WITH_TENSORFLOW}")
        if token_log_probs:
            raise RequestError(
                422, "token_log_probs is not available with the ctranslate2 engine: "
                "CTranslate2 gives each translation's log P, not each token's; for them, "
                f"{WITH_TENSORFLOW}")
        return super().decoding(beam, alpha, n_best, prefix, sampling, temperature, seed)

    def start(self):
        """Translate one sentence: the model answers before the server says it is ready."""
        self.translate(self.defaults, False, ["."])

    def translator(self, search, weights):
        """The export's `ExportedTranslator` for `search` (a `SearchConfig` or a
        `Decoding`), with attention weights if `weights` (the same loaded model)."""
        return self.exported.adjusted(Decoding.of(search).search, weights)

    def source_lengths(self, texts):
        """The number of tokens the model reads of each text (`[END]` included if it
        was trained so)."""
        return [len(self.exported.source_tokens(text)) for text in texts]

    def too_long(self, length):
        if length > self.exported.source_positions:
            return (f"its {length} source tokens are more than the export reads "
                    f"({self.exported.source_positions}); split it")
        return None

    def translate(self, search, weights, texts):
        """The `Translation` of each text, in one batch (`search`: a `SearchConfig` or a
        `Decoding`, whose prefix every text gets)."""
        decoding = Decoding.of(search)
        return self.translator(decoding, weights).translate(
            texts, batch_size=TRANSLATE_BATCH, prefixes=[decoding.prefix] * len(texts))
