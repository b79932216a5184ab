"""How much memory a model needs to train, known before any weight is allocated.

A model too large for the machine fails deep inside TensorFlow (an allocation of
terabytes raises `ResourceExhaustedError`, or the kernel kills the process); counting
its parameters from the configuration refuses it in one line instead.

No TensorFlow here.
"""

import os

from attncli.config.training import TrainingConfig
from attncli.errors import AttncliError

# float32 copies of every trainable weight while training with Adam: the weights,
# their gradients, and Adam's first and second moments.
_TRAINING_COPIES = 4
_BYTES_PER_VALUE = 4


def minimum_parameter_count(config):
    """A lower bound of the trainable parameters of `Seq2Seq(config)`.

    The embeddings, the encoder's and decoder's layers and the output layer, the bulk
    of any configuration; biases, bridge, attention scores and normalisation are left
    out, so the bound never exceeds the true count. With E the embedding size, U the
    units, V the vocabulary sizes:

        embeddings       (V_src + V_tgt) E
        recurrent layer  g (I U + U U) d   per layer: g gates (GRU 3, LSTM 4), I its
                         input size (E, then U or 2U when directions are concatenated),
                         d the encoder's directions (1 for the decoder)
        attention block  3 E E + 2 E F     per block: the query, key and value
                         projections of its self-attention and its feed-forward
                         network of inner size F (default 4E)
        cascade          the recurrent layers, R E for the projection of their
                         outputs (R = U, or 2U concatenated) when R != E, and its
                         attention blocks
        output layer     H V_tgt + V_tgt   H = U after an RNN decoder, E after a
                         self-attention one

    Tied embeddings (`tie_embeddings`) count once: the output layer is then its
    bias V_tgt alone, and with `"all"` the embeddings are V_tgt E.

    Args:
        config: a `ModelConfig`.

    Returns:
        int.
    """
    embedding, units = config.embedding_dim, config.units
    gates = 3 if config.cell == "gru" else 4
    block = 3 * embedding * embedding + 2 * embedding * (
        config.feed_forward_dim or 4 * embedding
    )
    if config.encoder == "self-attention":
        encoder = config.encoder_layers * block
    else:
        directions = 2 if config.bidirectional else 1
        inputs = [embedding] + [config.recurrent_dim] * (config.encoder_layers - 1)
        encoder = sum(gates * (size * units + units * units) * directions for size in inputs)
    if config.encoder == "cascade":
        if config.recurrent_dim != embedding:
            encoder += config.recurrent_dim * embedding
        encoder += config.encoder_blocks * block
    if config.decoder == "self-attention":
        decoder, output_size = config.decoder_layers * block, embedding
    else:
        decoder, output_size = gates * (embedding * units + units * units), units
    output = (output_size + 1) * config.target_vocab_size
    if config.tie_embeddings != "none":
        output = config.target_vocab_size
    embeddings = (config.source_vocab_size + config.target_vocab_size) * embedding
    if config.tie_embeddings == "all":
        embeddings = config.target_vocab_size * embedding
    return embeddings + encoder + decoder + output


def available_memory():
    """Bytes of memory this process can still take (Linux's MemAvailable), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_fits_in_memory(config, training=None, available=None):
    """Refuse a model whose weights and optimizer state cannot fit in memory.

    Besides the 4 float32 copies of every weight (the weights, their gradients, Adam's
    two moments), training keeps one more for each of:

        training.average_decay        the moving average of the weights
        training.accumulate_steps > 1 the gradient sums (`GradientSums`: a float32
                                      dense copy of every trainable weight)

    Args:
        config: a `ModelConfig`.
        training: the run's `TrainingConfig`; defaults to `TrainingConfig()` (no average,
            no accumulation).
        available: bytes available; defaults to `available_memory()` (nothing is
            checked when that is unknown).

    Raises:
        AttncliError: naming the parameter count, the memory it needs and what is free.
    """
    available = available_memory() if available is None else available
    if available is None:
        return
    training = training or TrainingConfig()
    extra = []
    if training.average_decay is not None:
        extra.append("their moving average")
    if training.accumulate_steps > 1:
        extra.append("the gradient sums of training.accumulate_steps")
    counted = ["weights", "gradients", "Adam's moments", *extra]
    parameters = minimum_parameter_count(config)
    copies = _TRAINING_COPIES + len(extra)
    needed = parameters * copies * _BYTES_PER_VALUE
    if needed > available:
        raise AttncliError(
            f"the model is too large for this machine: at least {parameters:,} parameters, "
            f"{_size(needed)} for {', '.join(counted[:-1])} and {counted[-1]}, and "
            f"{_size(available)} of memory is available; make model.embedding_dim, "
            "model.units or the vocabularies (data.*.vocab_size) smaller"
        )


def _size(count):
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if count < 1024 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
