"""A TensorFlow SavedModel that translates strings to strings, served without attncli.

`export_saved_model` writes the graph of `Translator` (normalisation and tokenization
with tensorflow-text ops, vocabulary lookup, the search, detokenization) with the
model's weights: `write_saved_model` of its `signature_translators`. Its signatures take
some of three inputs:

    texts           string  (batch,)    source sentences, raw, as a user types them
    prefixes        string  (batch,)    what each translation must begin with ("" none)
    seeds           int64   (batch,)    each sentence's seed for sampling (>= 0)

and give four outputs:

    translation     string  (batch,)    the best translation, exactly the line
                                        `attncli translate` prints with the same search
    score           float32 (batch,)    its score, log P(Y | X) / lp(Y)
    translations    string  (batch, n)  the n best translations, best first
    scores          float32 (batch, n)  their scores

A sentence that is blank (nothing but whitespace, as Python's `str.strip` counts it)
is not translated, as in `attncli translate`: every translation of it is "" and every
score 0.

- `greedy` (also `serving_default`): `texts`; greedy search, `n` = 1.
- `beam`: `texts`; beam search; `n` is the search's `n_best`.
- `greedy_prefix`, `beam_prefix`: `texts` and `prefixes`; the same searches, each
  translation beginning with its prefix (`attncli translate --prefix`).
- `sample`: `texts`, `prefixes` and `seeds`; one translation per sentence drawn at
  random (`attncli translate --sampling ... --seed S`), n = 1.

The width of the beam, `n_best`, the length penalty's alpha, the maximum length and the
sampling (its method, cut and temperature) are fixed when exporting: the beam search's
tensors are shaped `(batch * beam_size, ...)` in its graph, so a width given at serving
time would need another search. The graph cannot refuse one sentence of a batch, so a
prefix is not checked there as `attncli translate` checks it: a reserved token in it is
read as `[UNK]`, and a prefix as long as the sentence's maximum length is cut there.

The tokenizers' ops are registered by `import tensorflow_text`, which a process must
run before it loads the SavedModel; `custom_ops` names those the graph uses.
"""

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from attncli.search.ensemble import Ensemble
from attncli.search.translation import Translator

SIGNATURES = ("greedy", "beam", "greedy_prefix", "beam_prefix", "sample")
DEFAULT_SIGNATURE = "serving_default"
INPUT = "texts"
# The inputs of each signature, beside `texts`.
INPUTS = {"greedy": (), "beam": (), "greedy_prefix": ("prefixes",),
          "beam_prefix": ("prefixes",), "sample": ("prefixes", "seeds")}
OUTPUTS = ("translation", "score", "translations", "scores")
# What Python's str.strip removes, written for RE2: \t \n \v \f \r, U+001C-U+001F, the
# space, U+0085 and the separators (Unicode category Z). RE2's \s has only \t\n\f\r
# and the space.
_BLANK = r"[\t-\r\x{1c}-\x{20}\x{85}\p{Z}]*"


def blank(texts):
    """Whether each string of `texts` `(batch,)` is empty or whitespace only: bool `(batch,)`."""
    return tf.strings.regex_full_match(texts, _BLANK)


def serving_outputs(translator, texts, prefixes=None, seeds=None):
    """The four outputs of a signature (see the module) for strings `texts` `(batch,)`,
    their `prefixes` (None: none) and `seeds` (None: 0)."""
    outputs = translator.serve(texts, prefixes, seeds)
    empty = blank(texts)[:, None]
    translations = tf.where(empty, tf.constant(""), outputs["translations"])
    scores = tf.where(empty, tf.constant(0.0), outputs["scores"])
    return {
        "translation": translations[:, 0],
        "score": scores[:, 0],
        "translations": translations,
        "scores": scores,
    }


def export_saved_model(
    directory, model, source_tokenizer, target_tokenizer, *, greedy, beam, sampling=None,
    source_end=False,
):
    """Writes a SavedModel with the signatures of the module into `directory`:
    `write_saved_model` of the `signature_translators` of the arguments.

    Args:
        directory: an absent or empty directory (`attncli.files.new_directory` gives one
            that is put in place only once written).
        model, source_tokenizer, target_tokenizer, source_end: as `signature_translators`
            takes them.
        greedy, beam, sampling: as `signature_decodings` takes them.
    """
    write_saved_model(directory, signature_translators(
        model, source_tokenizer, target_tokenizer, signature_decodings(greedy, beam, sampling),
        source_end=source_end,
    ))


def signature_decodings(greedy, beam, sampling=None):
    """The `Decoding` of each kind of signature, as `signature_translators` takes them.

    Args:
        greedy: the `SearchConfig` of the `greedy` signatures (`beam_size` 1); the
            `sample` signature's alpha and maximum length too.
        beam: the `SearchConfig` of the `beam` signatures (`beam_size` 1 gives greedy
            search there too).
        sampling: the `Sampling` of the `sample` signature (its `samples` must be 1).
            Defaults to `Sampling()`: the whole distribution at temperature 1.
    """
    from attncli.config.search import Decoding, Sampling

    return {"greedy": Decoding(greedy), "beam": Decoding(beam),
            "sample": Decoding(greedy, Sampling() if sampling is None else sampling)}


def signature_translators(model, source_tokenizer, target_tokenizer, decodings, *,
                          source_end=False):
    """The `Translator`s the signatures of the module call, as `write_saved_model` takes
    them: {"greedy": ..., "beam": ..., "sample": ...}, without attention weights and
    without per-call settings.

    Args:
        model: the `Seq2Seq`, or an `Ensemble` of them.
        source_tokenizer, target_tokenizer: `Tokenizer`s with their vocabularies.
        decodings: the `Decoding` of each kind, by the same names (`signature_decodings`):
            `greedy` searches with `beam_size` 1, `sample` draws one translation per
            sentence; their prefixes and seeds are the signatures' inputs.
        source_end: bool, append the end id to each source, as the model was trained.
            Defaults to False.
    """
    if set(decodings) != {"greedy", "beam", "sample"}:
        raise ValueError(f"the signatures are greedy, beam and sample. Received: "
                         f"{', '.join(decodings)}")
    for kind, decoding in decodings.items():
        if decoding.prefix or decoding.seed:
            raise ValueError(f"the {kind} signature takes its prefixes and seeds as inputs. "
                             f"Received: prefix={decoding.prefix!r}, seed={decoding.seed}")
        if (decoding.sampling is None) != (kind != "sample"):
            raise ValueError(f"the sample signature samples, and only it. Received: "
                             f"{kind} with sampling={decoding.sampling}")
        if kind != "beam" and decoding.search.beam_size != 1:
            raise ValueError(f"the {kind} signature needs beam_size=1. "
                             f"Received: beam_size={decoding.search.beam_size}")
    if decodings["sample"].sampling.samples != 1:
        raise ValueError(f"the sample signature draws one translation per sentence. "
                         f"Received: samples={decodings['sample'].sampling.samples}")
    return {kind: Translator(model, source_tokenizer, target_tokenizer, decoding, source_end,
                             attention_weights=False)
            for kind, decoding in decodings.items()}


def write_saved_model(directory, translators):
    """Writes a SavedModel with the signatures of the module into `directory`.

    A translator whose `translate_graph` has already run (`attncli export` translates
    its check's sentences with the same translators) keeps that trace: the archive's
    trace of each signature calls it rather than tracing the translator again.
    `tf.saved_model.save` still traces every signature, and so each translator, once
    more: its save context is part of a trace's key.

    Args:
        directory: an absent or empty directory (`attncli.files.new_directory` gives one
            that is put in place only once written).
        translators: what `signature_translators` returns.
    """
    import keras

    model = translators["greedy"].model
    archive = keras.export.ExportArchive()
    for member in model.models if isinstance(model, Ensemble) else [model]:
        archive.track(member)
    # A tokenizer's own resources (a SentencePiece model) go with the graph that uses them.
    for tokenizer in (translators["greedy"].source_tokenizer,
                      translators["greedy"].target_tokenizer):
        for trackable in tokenizer.trackables:
            archive.track(trackable)
    for translator in translators.values():
        archive.track(translator.source_table)
        archive.track(translator.target_table)
    specs = {"texts": tf.TensorSpec([None], tf.string, name=INPUT),
             "prefixes": tf.TensorSpec([None], tf.string, name="prefixes"),
             "seeds": tf.TensorSpec([None], tf.int64, name="seeds")}
    for name in SIGNATURES:
        translator = translators[name.removesuffix("_prefix")]
        inputs = INPUTS[name]
        archive.add_endpoint(name, _signature(translator, inputs),
                             input_signature=[specs["texts"], *(specs[i] for i in inputs)])
    archive.write_out(str(directory), verbose=False)


def _signature(translator, inputs):
    """The function of one signature: `texts`, then the `inputs` named (see the module)."""
    if inputs == ("prefixes", "seeds"):
        def translate(texts, prefixes, seeds):
            return serving_outputs(translator, texts, prefixes, seeds)
    elif inputs == ("prefixes",):
        def translate(texts, prefixes):
            return serving_outputs(translator, texts, prefixes)
    else:
        def translate(texts):
            return serving_outputs(translator, texts)
    return translate


def custom_ops(directory):
    """The sorted names of the ops of the SavedModel in `directory` that TensorFlow itself
    does not define (here, those tensorflow-text registers)."""
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((directory / "saved_model.pb").read_bytes())
    ops = set()
    for graph in saved_model.meta_graphs:
        ops.update(node.op for node in graph.graph_def.node)
        for function in graph.graph_def.library.function:
            ops.update(node.op for node in function.node_def)
    return sorted(op for op in ops if not hasattr(tf.raw_ops, op))
