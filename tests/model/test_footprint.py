"""The parameter count a model is refused by: a lower bound of the built model's."""

import pytest

from attncli.config.model import ModelConfig
from attncli.errors import AttncliError
from attncli.model.footprint import check_fits_in_memory, minimum_parameter_count

CONFIGS = [
    {},
    {"cell": "lstm", "encoder_layers": 2, "merge_mode": "concat", "decoder": "bahdanau",
     "score": "additive"},
    {"bidirectional": False, "input_feeding": True, "embedding_dim": 64, "units": 32},
    {"cell": "lstm", "encoder_layers": 3, "bridge": "zeros", "score": "dot"},
    {"encoder": "self-attention", "encoder_layers": 2, "embedding_dim": 64, "units": 48},
    {"encoder": "self-attention", "decoder": "self-attention", "decoder_layers": 2,
     "embedding_dim": 64, "heads": 2, "score": "scaled_dot", "feed_forward_dim": 96},
    {"decoder": "bahdanau", "tie_embeddings": "target"},
    {"encoder": "self-attention", "decoder": "self-attention", "embedding_dim": 64,
     "tie_embeddings": "target"},
]


@pytest.mark.parametrize("settings", CONFIGS)
def test_the_bound_is_below_the_built_model_and_close_to_it(settings):
    from attncli.model.encoder_decoder import Seq2Seq

    config = ModelConfig(source_vocab_size=500, target_vocab_size=700, **settings)
    built = Seq2Seq(config).count_params()
    bound = minimum_parameter_count(config)
    assert 0.75 * built <= bound <= built


def test_a_model_beyond_the_memory_is_refused():
    config = ModelConfig(source_vocab_size=400, target_vocab_size=400, embedding_dim=10**9)
    with pytest.raises(AttncliError, match="too large for this machine"):
        check_fits_in_memory(config, available=64 * 2**30)
    small = ModelConfig(source_vocab_size=400, target_vocab_size=400)
    check_fits_in_memory(small, available=64 * 2**30)
    # 4 float32 copies of at least this many parameters: weights, gradients, Adam's moments.
    needed = 16 * minimum_parameter_count(small)
    with pytest.raises(AttncliError):
        check_fits_in_memory(small, available=needed - 1)
    check_fits_in_memory(small, available=needed)
