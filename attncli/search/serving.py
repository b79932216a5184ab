"""A TensorFlow SavedModel that translates strings to strings, served without attncli.

`export_saved_model` writes the graph of `Translator` (normalisation and tokenization
with tensorflow-text ops, vocabulary lookup, the search, detokenization) with the
model's weights. Two signatures, each taking one input:

    texts           string  (batch,)    source sentences, raw, as a user types them

and giving four outputs:

    translation     string  (batch,)    the best translation, exactly the line
                                        `attncli translate` prints with the same search
    score           float32 (batch,)    its score, log P(Y | X) / lp(Y)
    translations    string  (batch, n)  the n best translations, best first
    scores          float32 (batch, n)  their scores

A sentence that is blank (nothing but whitespace, as Python's `str.strip` counts it)
is not translated, as in `attncli translate`: every translation of it is "" and every
score 0.

- `greedy` (also `serving_default`): greedy search, `n` = 1.
- `beam`: beam search; `n` is the search's `n_best`.

The width of the beam, `n_best`, the length penalty's alpha and the maximum length are
fixed when exporting: the beam search's tensors are shaped `(batch * beam_size, ...)`
in its graph, so a width given at serving time would need another search.

The tokenizers' ops are registered by `import tensorflow_text`, which a process must
run before it loads the SavedModel; `custom_ops` names those the graph uses.
"""

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from attncli.search.ensemble import Ensemble
from attncli.search.translation import Translator

SIGNATURES = ("greedy", "beam")
DEFAULT_SIGNATURE = "serving_default"
INPUT = "texts"
OUTPUTS = ("translation", "score", "translations", "scores")
# What Python's str.strip removes, written for RE2: \t \n \v \f \r, U+001C-U+001F, the
# space, U+0085 and the separators (Unicode category Z). RE2's \s has only \t\n\f\r
# and the space.
_BLANK = r"[\t-\r\x{1c}-\x{20}\x{85}\p{Z}]*"


def blank(texts):
    """Whether each string of `texts` `(batch,)` is empty or whitespace only: bool `(batch,)`."""
    return tf.strings.regex_full_match(texts, _BLANK)


def serving_outputs(translator, texts):
    """The four outputs of a signature (see the module) for strings `texts` `(batch,)`."""
    outputs = translator.serve(texts)
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
    directory, model, source_tokenizer, target_tokenizer, *, greedy, beam, source_end=False
):
    """Writes a SavedModel with the `greedy` and `beam` signatures into `directory`.

    Args:
        directory: an absent or empty directory (`attncli.files.new_directory` gives one
            that is put in place only once written).
        model: the `Seq2Seq`, or an `Ensemble` of them.
        source_tokenizer, target_tokenizer: `Tokenizer`s with their vocabularies.
        greedy: the `SearchConfig` of the `greedy` signature (`beam_size` 1).
        beam: the `SearchConfig` of the `beam` signature (`beam_size` 1 gives greedy
            search there too).
        source_end: bool, append the end id to each source, as the model was trained.
            Defaults to False.
    """
    import keras

    if greedy.beam_size != 1:
        raise ValueError(
            f"the greedy signature needs beam_size=1. Received: beam_size={greedy.beam_size}"
        )
    archive = keras.export.ExportArchive()
    for member in model.models if isinstance(model, Ensemble) else [model]:
        archive.track(member)
    texts = [tf.TensorSpec([None], tf.string, name=INPUT)]
    for name, search in (("greedy", greedy), ("beam", beam)):
        translator = Translator(
            model, source_tokenizer, target_tokenizer, search, source_end, attention_weights=False
        )
        archive.track(translator.source_table)
        archive.add_endpoint(name, _signature(translator), input_signature=texts)
    archive.write_out(str(directory), verbose=False)


def _signature(translator):
    """The function of one signature: `texts` is its only argument."""

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
