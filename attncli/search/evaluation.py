"""Scoring a model on a split: decode its sources, compare with every reference.

A source that appears several times (a CMUdict word with several pronunciations, a
Tatoeba sentence with several translations) is decoded once and compared with all of
its references: a pronunciation is right if it equals any of them (WER) and its
phoneme errors count against the closest (PER); BLEU takes the translations as
sacreBLEU's several reference streams.

    translation:    BLEU (cased, 13a), BLEU lower-cased, chrF
    pronunciation:  PER = sum(edits to the closest reference) / sum(its length)
                    WER = words matching no reference / words
"""

import time

from attncli.search.metrics import pronunciation_scores, translation_scores


def score_outputs(task, outputs, references, lowercase_bleu=True):
    """The task's corpus figures of `outputs` against `references`.

    Args:
        task: `"translation"` or `"pronunciation"`.
        outputs: list of output strings (phonemes separated by spaces).
        references: list, aligned with `outputs`, of lists of reference strings.
        lowercase_bleu: also compute the lower-cased BLEU (one more sacreBLEU pass).
            Defaults to True.

    Returns:
        dict: `{"bleu", "bleu_lowercase", "chrf", "bleu_signature"}` (without
        `"bleu_lowercase"` if not asked for) or `{"per", "wer", "words"}`.
    """
    if task == "pronunciation":
        scores = pronunciation_scores(
            [output.split() for output in outputs],
            [[reference.split() for reference in options] for options in references],
        )
        return {"per": scores.per, "wer": scores.wer, "words": scores.words}
    most = max(len(options) for options in references)
    # sacreBLEU takes one stream per reference; a sentence with fewer references
    # repeats its first, which changes neither clipped n-gram counts nor lengths.
    streams = [
        [options[i] if i < len(options) else options[0] for options in references]
        for i in range(most)
    ]
    cased = translation_scores(outputs, streams)
    figures = {"bleu": cased.bleu, "chrf": cased.chrf, "bleu_signature": cased.bleu_signature}
    if lowercase_bleu:
        figures["bleu_lowercase"] = translation_scores(outputs, streams, lowercase=True).bleu
    return figures


def evaluate_corpus(translator, corpus, task, count=None, normalise=None, batch_size=64,
                    lowercase_bleu=True):
    """Decode the distinct sources of `corpus` and score them.

    Args:
        translator: a `Translator` (its search settings are used).
        corpus: a `Corpus`; sources are grouped with all of their references.
        task: `"translation"` or `"pronunciation"`.
        count: score only the first `count` distinct sources. Defaults to all.
        normalise: None, or a function mapping a list of reference strings to the
            form the target side is written in (when it folds case or drops
            characters, which no output could restore).
        batch_size: sources decoded at once. Defaults to 64.
        lowercase_bleu: passed to `score_outputs`. Defaults to True.

    Returns:
        `(figures, outputs)`: the dict of `score_outputs` plus `"sentences"` and
        `"seconds"` (decoding time), and the best output for each distinct source.
    """
    sources, references = corpus.references()
    if count is not None:
        sources, references = sources[:count], references[:count]
    started = time.monotonic()
    results = translator.translate(sources, batch_size=batch_size)
    seconds = time.monotonic() - started
    outputs = [result.hypotheses[0].text for result in results]
    if normalise is not None:
        references = normalised_references(references, normalise)
    figures = score_outputs(task, outputs, references, lowercase_bleu=lowercase_bleu)
    return {**figures, "sentences": len(sources), "seconds": seconds}, outputs


def normalised_references(references, normalise):
    """`references` (a list of lists of strings) passed through `normalise` in one call.

    `normalise` runs the target tokenizer, whose fixed cost per call is far above its
    cost per string: once per source it took 17 s of CPU for 2,000 validation
    sentences, about four fifths of each evaluation; once for all of them, a fraction
    of a second.
    """
    flat = [reference for options in references for reference in options]
    normalised = iter(normalise(flat) if flat else [])
    return [[next(normalised) for _ in options] for options in references]


def reference_normaliser(tokenizer):
    """The function that writes references the way the target side is tokenized, or None.

    When the target side folds case, strips accents or drops characters, no output
    could ever match what was removed, so the references are passed through the same
    normalisation (tokenized, then detokenized) before scoring.

    Args:
        tokenizer: the target `Tokenizer` (its `lowercase`, `strip_accents` and
            `drop_pattern` decide).

    Returns:
        A function from a list of reference strings to their normalised strings, or
        None when the side keeps the text as it is written.
    """
    if not normalises(tokenizer):
        return None
    import tensorflow as tf

    def normalised(texts):
        tokens = tokenizer.tokenize(tf.constant(texts, dtype=tf.string))
        return [text.decode("utf-8") for text in tokenizer.detokenize(tokens).numpy()]

    return normalised


def normalises(tokenizer):
    """Whether `tokenizer` writes text differently from how it is given: folds case,
    strips accents or drops characters, or is given pieces (`pretokenized`: a reference
    `Mach@@ en` is scored as the text its pieces join into, `Machen`, as outputs are)."""
    return (tokenizer.lowercase or tokenizer.strip_accents or tokenizer.drop_pattern is not None
            or tokenizer.level == "pretokenized")


def reference_form(tokenizer):
    """How references are compared, in words, for a line that reports a score.

    `"references normalised like the model's target side: lower case, accents stripped,
    characters matching [^ a-z.?!,¿] dropped"` or `"raw references, cased"`.
    """
    if not normalises(tokenizer):
        return "raw references, cased"
    steps = []
    if tokenizer.level == "pretokenized":
        steps.append(f"pieces joined by {tokenizer.joiner or 'spaces'}")
    if tokenizer.lowercase:
        steps.append("lower case")
    if tokenizer.strip_accents:
        steps.append("accents stripped")
    if tokenizer.drop_pattern is not None:
        steps.append(f"characters matching {tokenizer.drop_pattern} dropped")
    return "references normalised like the model's target side: " + ", ".join(steps)
