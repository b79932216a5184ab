"""A translated sentence's attention: every attention, layer and head, and any one step.

`inspect_sentence(loaded, translator, translation)` gives the `SentenceView`
(`attncli.search.sentence_view`) of one hypothesis: the weights of each attention the
model has, as the model computed them for the tokens the search emitted (a recurrent
decoder's: the weights the search returned; a self-attention side's:
`Seq2Seq.attention_maps`, teacher-forced over the hypothesis, which gives what the
search computed). A model with an alignment layer (`model.alignment_layer`) shows it as
the attention `"alignment"`, one layer and one head, teacher-forced over the tokens
shown as `attncli align` reads it.
`inspect_reference(loaded, translator, source, reference)` gives the view of a given
translation instead: forced decoding (`attncli.search.forced`), its every attention
teacher-forced over the reference's tokens, and the reference's probability.

Words. Each side's words are the space-separated words of its text (the source as
given, the translation as printed or the reference as given), each made of the tokens
the tokenizer made of it (`sentence_words`); the view folds its matrices into them.
"""

from typing import NamedTuple

import numpy as np

from attncli.search.sentence_view import START_LABEL, AttentionMatrices, SentenceView


class ReferenceScore(NamedTuple):
    """How probable the model finds a given translation (`attncli.search.forced`):
    `log_prob` = log P(reference | source), `[END]` included; `perplexity` =
    exp(-log_prob / tokens); `score` = log_prob / lp, the search's own score."""

    log_prob: float
    perplexity: float
    score: float

    def describe(self):
        """One line that says which figure is which."""
        return (f"score {self.score:.3f} (log P / lp, the search's score), log P "
                f"{self.log_prob:.3f}, perplexity {self.perplexity:.3f} per token")


def sentence_words(tokenizer, text, tokens):
    """The space-separated words of `text`, each a `Word` with the positions in
    `tokens` (the tokens `tokenizer` made of `text`, or a search emitted and `text`
    detokenized) of its pieces.

    The pieces are found by `attncli.search.alignments.text_words` on the text as the
    tokenizer normalised it, one word at a time, so that a character the normalisation
    drops or changes moves no piece to the next word; a word normalised away keeps no
    position (and gets no link).
    """
    import tensorflow as tf

    from attncli.search.alignments import Word, text_words, words

    given = text.split()
    if not given:
        return []
    normalized = [word.decode("utf-8").split()
                  for word in tokenizer.normalize(tf.constant(given)).numpy().tolist()]
    found = iter(text_words(" ".join(part for parts in normalized for part in parts),
                            words(tokens, tokenizer.level)))
    result = []
    for word, parts in zip(given, normalized):
        positions = [position for _ in parts for position in next(found).positions]
        result.append(Word(word, positions))
    return result


def inspect_sentence(loaded, translator, translation, hypothesis=0, maps=None,
                     reference=None):
    """The `SentenceView` of `translation.hypotheses[hypothesis]`.

    Args:
        loaded: the loaded model (`.model`, `.source_tokenizer`, `.target_tokenizer`).
        translator: the `Translator` that translated it (its source ids).
        translation: a `Translation` with attention weights.
        hypothesis: int, which hypothesis to show. Defaults to 0, the best.
        maps: None, or the model's attentions teacher-forced over that hypothesis's
            tokens, as `Forced.attentions` holds them (`"cross"`, and `"encoder"`,
            `"decoder"` and `"alignment"` if the model has them: lists per layer of
            `(heads, rows, columns)`), used instead of the search's weights and of running
            `Seq2Seq.attention_maps` again. Defaults to None.
        reference: a `ReferenceScore` when the hypothesis is a given translation.
    """
    import tensorflow as tf

    from attncli.data.vocabulary import START

    model = loaded.model
    chosen = translation.hypotheses[hypothesis]
    tokens = list(chosen.tokens)
    source_tokens = list(translation.source_tokens)
    _, source_ids = translator.source_ids(tf.constant([translation.source]))
    vocabulary = loaded.target_tokenizer.vocabulary
    emitted = [vocabulary.id_of(token) for token in tokens]
    target_in_ids = tf.constant([[START] + emitted[:-1]], tf.int32)
    decoder_inputs = [START_LABEL] + tokens[:-1]
    if maps is None:
        maps = {"encoder": [], "decoder": [], "cross": []}
        if (model.self_attention_encoder or model.self_attention_decoder
                or model.alignment_layer is not None):
            computed = model.attention_maps(source_ids, target_in_ids)
            maps = {name: [np.asarray(weights)[0] for weights in layers]
                    for name, layers in computed.items()}
        if not model.self_attention_decoder:  # the weights the search returned
            maps["cross"] = [np.asarray(chosen.weights)[None]]
    rows = len(tokens)

    def layers(name, height, width):
        return [np.asarray(weights)[:, :height, :width] for weights in maps.get(name, [])]

    attentions = {"cross": AttentionMatrices(
        "cross", tokens, source_tokens, "output", "source",
        layers("cross", rows, len(source_tokens)))}
    if maps.get("encoder"):
        attentions["encoder"] = AttentionMatrices(
            "encoder", source_tokens, source_tokens, "source", "source",
            layers("encoder", len(source_tokens), len(source_tokens)))
    if maps.get("decoder"):
        attentions["decoder"] = AttentionMatrices(
            "decoder", tokens, decoder_inputs, "output", "decoder input",
            layers("decoder", rows, rows))
    if maps.get("alignment"):
        attentions["alignment"] = AttentionMatrices(
            "alignment", tokens, source_tokens, "output", "source",
            layers("alignment", rows, len(source_tokens)))
    hypotheses = [
        {"text": each.text, "tokens": list(each.tokens), "score": float(each.score),
         "token_log_probs": each.token_log_probs}
        for each in translation.hypotheses
    ]
    source_words = sentence_words(loaded.source_tokenizer, translation.source, source_tokens)
    target_words = sentence_words(loaded.target_tokenizer, chosen.text, tokens)
    return SentenceView(model, translation.source, source_tokens, hypotheses, hypothesis,
                        attentions, source_ids, target_in_ids, source_words, target_words,
                        reference)


def inspect_reference(loaded, translator, source, reference):
    """The `SentenceView` of a given translation `reference` of `source`: forced
    decoding (`attncli.search.forced.force`), every attention teacher-forced over the
    reference's tokens, and its `ReferenceScore`."""
    from attncli.search.forced import force, perplexity

    [forced] = force(translator, [source], [reference])
    score = ReferenceScore(forced.log_prob, perplexity(forced), forced.score)
    return inspect_sentence(loaded, translator, forced.translation(),
                            maps=forced.attentions, reference=score)
