"""SentencePiece model files, read and checked without TensorFlow.

A configuration that names a `.model` file is checked before anything heavy loads, so a
missing or damaged file is one line naming it.
"""

from pathlib import Path

from attncli.errors import DataError


def sentencepiece_file(name: str) -> str:
    """The file name of a side's SentencePiece model in a run or model directory."""
    return f"{name}.sentencepiece.model"


def read_sentencepiece_model(path, fix="give a model the sentencepiece library wrote") -> bytes:
    """The bytes of the SentencePiece model file `path`, checked to be one.

    Args:
        path: the `.model` file.
        fix: what the user should do, ending the message of a failure.

    Raises:
        DataError: one line naming the file when it is missing, unreadable or no model.
    """
    import sentencepiece

    try:
        model = Path(path).read_bytes()
    except OSError as error:
        reason = "no such file" if isinstance(error, FileNotFoundError) else error.strerror
        raise DataError(f"cannot read the SentencePiece model {path} ({reason}); {fix}") from None
    try:
        sentencepiece.SentencePieceProcessor(model_proto=model)
    except (RuntimeError, OSError, TypeError):
        raise DataError(f"{path} is not a SentencePiece model (damaged?); {fix}") from None
    return model
