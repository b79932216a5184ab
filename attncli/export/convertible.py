"""Whether a model can be exported as CTranslate2 runs it, read from its configuration
alone (no TensorFlow, no CTranslate2)."""

ACTIVATIONS = ("relu", "gelu")


def ctranslate2_refusal(config):
    """Why the model of `config` (a `ModelConfig`) cannot be a CTranslate2 Transformer,
    in words for a one-line error; None when it can."""
    if config.encoder != "self-attention" or config.decoder != "self-attention":
        return (f"this model (encoder {config.encoder}, decoder {config.decoder}) is not a "
                "Transformer: CTranslate2 has no recurrent encoder or decoder to run it "
                "(model.encoder and model.decoder must both be self-attention)")
    if config.score != "scaled_dot":
        return (f"its cross-attention scores with {config.score}; CTranslate2 computes the "
                "scaled dot score only (model.score: scaled_dot)")
    if config.activation not in ACTIVATIONS:
        return f"CTranslate2 has no {config.activation} activation for the feed-forward networks"
    return None
