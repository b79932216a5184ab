"""How much memory a model needs to train, known before any weight is allocated.

A model too large for the machine fails deep inside TensorFlow (an allocation of
terabytes raises `ResourceExhaustedError`, or the kernel kills the process); counting
its parameters from the configuration refuses it in one line instead.

No TensorFlow here.
"""

import os

from attncli.errors import AttncliError

# float32 copies of every trainable weight while training with Adam: the weights,
# their gradients, and Adam's first and second moments.
_TRAINING_COPIES = 4
_BYTES_PER_VALUE = 4


def minimum_parameter_count(config):
    """A lower bound of the trainable parameters of `Seq2Seq(config)`.

    The embeddings, the recurrent kernels of encoder and decoder and the output layer,
    the bulk of any configuration; biases, bridge and attention weights are left out,
    so the bound never exceeds the true count:

        (V_src + V_tgt) E + g (E U + U U) d + (L - 1) g (U_in U + U U) d
            + g (E U + U U) + U V_tgt + V_tgt

    with E the embedding size, U the units, g the gates of the cell (GRU 3, LSTM 4),
    d the directions of the encoder, L its layers and U_in their input size (U, or 2U
    when the directions are concatenated).

    Args:
        config: a `ModelConfig`.

    Returns:
        int.
    """
    embedding, units = config.embedding_dim, config.units
    gates = 3 if config.cell == "gru" else 4
    directions = 2 if config.bidirectional else 1
    layer_input = units * (2 if config.bidirectional and config.merge_mode == "concat" else 1)
    recurrent = units * units
    encoder = gates * (embedding * units + recurrent) * directions
    encoder += (config.encoder_layers - 1) * gates * (layer_input * units + recurrent) * directions
    decoder = gates * (embedding * units + recurrent)
    output = units * config.target_vocab_size + config.target_vocab_size
    embeddings = (config.source_vocab_size + config.target_vocab_size) * embedding
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


def check_fits_in_memory(config, average_weights=False, available=None):
    """Refuse a model whose weights and optimizer state cannot fit in memory.

    Args:
        config: a `ModelConfig`.
        average_weights: bool, whether the optimizer also keeps a moving average of
            the weights (one more copy).
        available: bytes available; defaults to `available_memory()` (nothing is
            checked when that is unknown).

    Raises:
        AttncliError: naming the parameter count, the memory it needs and what is free.
    """
    available = available_memory() if available is None else available
    if available is None:
        return
    parameters = minimum_parameter_count(config)
    copies = _TRAINING_COPIES + (1 if average_weights else 0)
    needed = parameters * copies * _BYTES_PER_VALUE
    if needed > available:
        raise AttncliError(
            f"the model is too large for this machine: at least {parameters:,} parameters, "
            f"{_size(needed)} for weights, gradients and Adam's moments, and "
            f"{_size(available)} of memory is available; make model.embedding_dim, "
            "model.units or the vocabularies (data.*.vocab_size) smaller"
        )


def _size(count):
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if count < 1024 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
