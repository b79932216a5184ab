"""The files both toolkits of a side-by-side run read: Multi30k and one SentencePiece model.

    WORK/data/
        train.de train.en  val.de val.en  test_2016_flickr.de test_2016_flickr.en
                           the Multi30k files as given (or their first `limit` lines)
        sentencepiece.model   one unigram model learned from train.de and train.en together
        pieces.txt            its pieces, one a line, the 4 reserved tokens left out
        settings.json         what the files were made from; a later run must match it

One model for both languages (a joint vocabulary): German and English captions share
names, numbers and punctuation, and the Transformers of both toolkits tie the source
embeddings, the target embeddings and the output layer into one matrix, as Joey NMT's
documented Transformer recipes do (`tied_embeddings` and `tied_softmax` over a joint
SentencePiece or BPE vocabulary), which needs one vocabulary for both sides.

The model is learned as attncli learns its own at `level: sentencepiece` (identity
normalisation, spaces kept as written, every character of the training text a piece),
with attncli's reserved tokens at ids 0-3 ([PAD], [UNK], [START], [END]), but without
byte fallback: a character never seen in training is [UNK] for both toolkits, and no
model can write the byte of a line break into a translation (an untrained one did, and
its output file no longer had one line per sentence). attncli reads it as
`data.{source,target}.sentencepiece_model` with `normalization: null`, so both toolkits
cut the same raw text into the same pieces, and Joey NMT reads it as its `sentencepiece`
tokenizer's `model_file` with `pieces.txt` as its `voc_file`, so both have the same
8,000 tokens (Joey puts [UNK] at id 0 and [PAD] at
1, attncli [PAD] at 0 and [UNK] at 1; every other id is the same).
"""

import io
import json
from pathlib import Path

from attncli.data.text_rules import END_TOKEN, PAD_TOKEN, RESERVED_TOKENS, START_TOKEN, UNK_TOKEN

#: The Multi30k splits: training, validation (chooses each side's kept model), test.
SPLITS = ("train", "val", "test_2016_flickr")
SOURCE, TARGET = "de", "en"


class SharedData:
    """The prepared folder (see the module's docstring).

    Args:
        directory: the folder, `WORK/data`.
    """

    def __init__(self, directory):
        self.directory = Path(directory)

    @property
    def sentencepiece_model(self):
        return self.directory / "sentencepiece.model"

    @property
    def pieces(self):
        return self.directory / "pieces.txt"

    def path(self, split, language):
        """`WORK/data/SPLIT.LANGUAGE`."""
        return self.directory / f"{split}.{language}"

    def prefix(self, split):
        """The path both toolkits complete with `.de` / `.en`."""
        return self.directory / split

    def lines(self, split, language):
        return self.path(split, language).read_text("utf-8").splitlines()

    def target_tokens(self, split="train"):
        """Target tokens of one pass over `split`: its English pieces plus one end token
        a sentence, what both toolkits count as a batch's target tokens (non-padding
        positions of the output, end of sentence included)."""
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=str(self.sentencepiece_model))
        return sum(len(pieces) + 1 for pieces in processor.encode(self.lines(split, TARGET)))

    def lengths(self, split="train"):
        """`(source, target)` piece counts of every pair of `split`."""
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=str(self.sentencepiece_model))
        return [[len(pieces) for pieces in processor.encode(self.lines(split, language))]
                for language in (SOURCE, TARGET)]


def prepare(multi30k, directory, *, limit=None, vocab_size=8000):
    """Write (once) the shared files into `directory` from the Multi30k folder `multi30k`.

    Args:
        multi30k: the folder with `train.de`, `val.en`, `test_2016_flickr.de`, ...
        directory: where the shared files go; made if missing.
        limit: int or None, keep only the first `limit` lines of each file (a smoke run).
        vocab_size: pieces of the SentencePiece model, the 4 reserved ones included.

    Returns:
        The `SharedData`.

    Raises:
        SystemExit: the folder holds files made from other settings.
    """
    shared = SharedData(directory)
    settings = {"multi30k": str(Path(multi30k).resolve()), "limit": limit,
                "vocab_size": vocab_size, "byte_fallback": False}
    recorded = shared.directory / "settings.json"
    if recorded.is_file():
        if json.loads(recorded.read_text()) != settings:
            raise SystemExit(f"{shared.directory} was prepared with {recorded.read_text().strip()}"
                             f", not {settings}: give another --work-dir")
        return shared
    shared.directory.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        for language in (SOURCE, TARGET):
            lines = (Path(multi30k) / f"{split}.{language}").read_text("utf-8").splitlines()
            text = "".join(f"{line}\n" for line in lines[:limit])
            shared.path(split, language).write_text(text, "utf-8")
    model = learn_sentencepiece(shared.lines("train", SOURCE) + shared.lines("train", TARGET),
                                vocab_size)
    shared.sentencepiece_model.write_bytes(model)
    shared.pieces.write_text("".join(f"{piece}\n" for piece in model_pieces(model)), "utf-8")
    recorded.write_text(json.dumps(settings) + "\n")
    return shared


def learn_sentencepiece(texts, vocab_size):
    """A unigram SentencePiece model of `vocab_size` pieces learned from `texts`, with
    attncli's settings and reserved tokens (see the module's docstring)."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, model_type="unigram",
        vocab_size=vocab_size, hard_vocab_limit=False,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        character_coverage=1.0, byte_fallback=False,
        pad_id=0, unk_id=1, bos_id=2, eos_id=3,
        pad_piece=PAD_TOKEN, unk_piece=UNK_TOKEN, bos_piece=START_TOKEN, eos_piece=END_TOKEN,
        unk_surface=UNK_TOKEN, num_threads=1, minloglevel=2,
    )
    return model.getvalue()


def model_pieces(model):
    """The pieces of a SentencePiece `model` (bytes) in id order, the reserved ones left out."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    pieces = (processor.id_to_piece(index) for index in range(processor.get_piece_size()))
    return [piece for piece in pieces if piece not in RESERVED_TOKENS]
