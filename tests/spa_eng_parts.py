"""Real tokenizers from the first Tatoeba Spanish-English pairs, and a small seeded model.

Shared by the translation and saving tests (not a test module itself).
"""

import os
from pathlib import Path

import pytest
import tensorflow as tf

from attncli.model.encoder_decoder import Seq2Seq
from attncli.config.model import ModelConfig
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer

REPO = Path(__file__).resolve().parents[1]
SENTENCES = ["¡Salga de aquí!", "¿Dónde está el baño?", "Tom no vino.", "Hace frío hoy."]


def spa_eng_pairs(limit):
    """The first `limit` (Spanish, English) pairs of the Tatoeba corpus."""
    root = os.environ.get("ATTNCLI_SHARED_DATA")
    data = Path(root) if root else REPO.parent / "shared" / "data"
    path = data / "spa-eng" / "spa.txt"
    if not path.is_file():
        message = f"the Tatoeba corpus is missing: {path} (set ATTNCLI_SHARED_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    pairs = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            english, spanish = line.rstrip("\n").split("\t")[:2]
            pairs.append((spanish, english))
            if len(pairs) == limit:
                break
    return pairs


def model_and_tokenizers(vocabulary_size=400, seed=1, **model_options):
    """An untrained `Seq2Seq` (seeded) and word tokenizers learned from 3,000 pairs.

    `model_options` are `ModelConfig` fields replacing the small RNN model's.
    """
    pairs = spa_eng_pairs(3000)
    tokenizers = []
    for side in (0, 1):
        tokenizer = Tokenizer("word", **TUTORIAL_NORMALIZATION)
        texts = [pair[side] for pair in pairs]
        vocabulary = tokenizer.build_vocabulary(texts, max_size=vocabulary_size)
        tokenizers.append(tokenizer.with_vocabulary(vocabulary))
    tf.keras.utils.set_random_seed(seed)
    options = dict(embedding_dim=16, units=16, score="dot")
    config = ModelConfig(
        source_vocab_size=vocabulary_size, target_vocab_size=vocabulary_size,
        **{**options, **model_options},
    )
    return Seq2Seq(config), tokenizers[0], tokenizers[1]
