"""Corpus metrics: BLEU and chrF for translation, PER and WER for pronunciation.

BLEU and chrF come from sacreBLEU on detokenized text against raw references, so
the figures are comparable with published ones (the signature says exactly how
they were computed). Pronunciations are scored against every reference of a word:
a word is right (for WER) if the output equals any of its pronunciations, and its
phoneme errors (for PER) are counted against the closest one.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class TranslationScores:
    """sacreBLEU corpus scores, in percent, with the signatures that define them."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str

    def as_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PronunciationScores:
    """Phoneme and word error rates in percent, over `words` words."""

    per: float
    wer: float
    words: int
    phoneme_errors: int
    reference_phonemes: int

    def as_dict(self):
        return dataclasses.asdict(self)


def translation_scores(hypotheses, references, lowercase=False):
    """Corpus BLEU (13a tokenization) and chrF of detokenized hypotheses.

    Args:
        hypotheses: list of output sentences, as plain text.
        references: list of reference sentences, line-aligned with `hypotheses`
            (one reference per sentence), or a list of such lists for several
            references per sentence.
        lowercase: bool; compare case-insensitively (BLEU only, chrF is
            case-sensitive as published). Defaults to False (the strict setting).

    Returns:
        TranslationScores.
    """
    from sacrebleu.metrics import BLEU, CHRF

    hypotheses = list(hypotheses)
    if references and isinstance(references[0], str):
        references = [list(references)]
    for stream in references:
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"{len(hypotheses)} hypotheses but {len(stream)} references; "
                "they must be line-aligned"
            )
    bleu = BLEU(lowercase=lowercase)
    chrf = CHRF()
    bleu_score = bleu.corpus_score(hypotheses, references)
    chrf_score = chrf.corpus_score(hypotheses, references)
    return TranslationScores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
    )


def edit_distance(hypothesis, reference):
    """Levenshtein distance between two token sequences (unit costs)."""
    previous = list(range(len(reference) + 1))
    for i, token in enumerate(hypothesis, start=1):
        current = [i]
        for j, expected in enumerate(reference, start=1):
            current.append(
                min(
                    previous[j] + 1,  # an extra hypothesis token (insertion)
                    current[j - 1] + 1,  # a missing reference token (deletion)
                    previous[j - 1] + (token != expected),  # substitution or match
                )
            )
        previous = current
    return previous[-1]


def pronunciation_scores(hypotheses, references):
    """PER and WER of phoneme sequences against several references per word.

    For each word, the closest reference (fewest edits; the longer one on a tie,
    which never inflates PER) contributes its edit distance and its length:
    `PER = sum(edits) / sum(reference lengths)`. `WER` is the percentage of words
    whose output equals none of their references.

    Args:
        hypotheses: list of phoneme sequences (lists of strings), one per word.
        references: list, aligned with `hypotheses`, of lists of reference
            phoneme sequences (a word may have several pronunciations).

    Returns:
        PronunciationScores.
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} reference sets; "
            "they must be aligned word by word"
        )
    if not hypotheses:
        raise ValueError("no words to score")
    wrong_words = edits = phonemes = 0
    for hypothesis, options in zip(hypotheses, references):
        if not options:
            raise ValueError("every word needs at least one reference pronunciation")
        hypothesis = list(hypothesis)
        distance, length = min(
            (edit_distance(hypothesis, list(option)), -len(option)) for option in options
        )
        edits += distance
        phonemes += -length
        wrong_words += distance != 0
    return PronunciationScores(
        per=100.0 * edits / max(phonemes, 1),
        wer=100.0 * wrong_words / len(hypotheses),
        words=len(hypotheses),
        phoneme_errors=edits,
        reference_phonemes=phonemes,
    )
