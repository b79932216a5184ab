import gzip
import logging
import subprocess
import sys

import numpy as np
import pytest
from shared_data import shared_data

from attncli.data.corpora import (
    bundled_attribution,
    bundled_corpus_path,
    read_bundled,
    read_corpus,
    read_splits,
    split_corpus,
)
from attncli.data.readers import (
    EMPTY_SIDE,
    UNDECODABLE,
    UNPAIRED,
    WRONG_COLUMNS,
    Corpus,
    CorpusError,
    read_parallel,
    read_pronunciations,
    read_tsv,
)
from attncli.errors import AttncliError


def first_lines(path, n):
    with open(path, encoding="utf-8-sig") as handle:
        return [next(handle).rstrip("\n") for _ in range(n)]


def test_tsv_reads_spanish_english_pairs_in_either_direction():
    path = shared_data("spa-eng/spa.txt")
    lines = first_lines(path, 300)
    english_to_spanish = read_tsv(path, limit=300)
    spanish_to_english = read_tsv(path, source_column=1, target_column=0, limit=300)
    assert english_to_spanish.sources == [line.split("\t")[0] for line in lines]
    assert english_to_spanish.targets == [line.split("\t")[1] for line in lines]
    assert spanish_to_english.sources == english_to_spanish.targets
    assert spanish_to_english.targets == english_to_spanish.sources
    assert english_to_spanish.report.bad_lines == 0
    assert english_to_spanish.report.pairs == english_to_spanish.report.lines == 300


def test_tsv_with_attribution_column_and_byte_order_mark():
    corpus = read_tsv(shared_data("cmn-eng/cmn.txt"), limit=200)
    assert len(corpus) == 200
    assert corpus.sources[0] == "Hi."  # the file starts with a UTF-8 byte order mark
    assert corpus.targets[0] == "嗨。"
    assert all("Attribution" not in target for target in corpus.targets)


def test_whole_chinese_corpus_only_counts_its_trailing_blank_line():
    corpus = read_tsv(shared_data("cmn-eng/cmn.txt"))
    assert len(corpus) == 29155
    assert corpus.report.blank_lines == 1
    assert corpus.report.bad_lines == 0


def test_parallel_files_pair_line_by_line():
    source_path, target_path = shared_data("multi30k/train.de"), shared_data("multi30k/train.en")
    corpus = read_parallel(source_path, target_path, limit=150)
    assert corpus.sources == first_lines(source_path, 150)
    assert corpus.targets == first_lines(target_path, 150)
    assert corpus.report.bad_lines == 0


def test_pronunciations_keep_every_reference():
    path = shared_data("cmudict/g014b2b.train")
    corpus = read_pronunciations(path, limit=40)
    assert len(corpus) == 40
    words, references = corpus.references()
    assert len(words) == len(set(line.split("\t")[0] for line in first_lines(path, 40)))
    by_word = dict(zip(words, references))
    assert by_word["AARONSON"] == ["AA R AH N S AH N", "EH R AH N S AH N"]
    assert by_word["ABABA"] == ["AA B AH B AH", "AH B AA B AH"]
    assert by_word["AAA"] == ["T R IH P AH L EY"]


def test_bundled_corpus_is_the_shared_tatoeba_file():
    path = bundled_corpus_path()
    assert path.name == "spa-eng.txt.gz"
    with gzip.open(path, "rb") as bundled:
        assert bundled.read() == shared_data("spa-eng/spa.txt").read_bytes()
    corpus = read_bundled(limit=100)
    english_to_spanish = read_tsv(shared_data("spa-eng/spa.txt"), limit=100)
    assert corpus.sources == english_to_spanish.targets  # Spanish → English by default
    assert read_bundled("eng", limit=100).sources == english_to_spanish.sources
    assert "tatoeba.org" in bundled_attribution()
    assert "manythings.org/anki" in bundled_attribution()


def test_corpora_module_does_not_import_tensorflow():
    code = "import sys, attncli.data.corpora; print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False"


def test_split_is_the_seeded_permutation():
    corpus = read_tsv(shared_data("spa-eng/spa.txt"), limit=1000)
    splits = split_corpus(corpus, valid=100, test=0.05, seed=3)
    order = np.random.default_rng(3).permutation(1000)
    assert splits.valid.sources == [corpus.sources[i] for i in order[-100:]]
    assert splits.test.sources == [corpus.sources[i] for i in order[850:900]]
    assert splits.train.targets == [corpus.targets[i] for i in order[:850]]
    assert split_corpus(corpus, valid=100, seed=3).valid.sources == splits.valid.sources
    assert split_corpus(corpus, valid=100, seed=4).valid.sources != splits.valid.sources


def test_split_by_sources_keeps_every_pronunciation_of_a_word_together():
    corpus = read_pronunciations(shared_data("cmudict/g014b2b.train"), limit=3000)
    words = list(dict.fromkeys(corpus.sources))
    assert len(words) < len(corpus)  # the sample holds words with several pronunciations
    splits = split_corpus(corpus, valid=0.1, test=20, seed=5, by="sources")
    order = np.random.default_rng(5).permutation(len(words))
    valid_words = [words[i] for i in order[-round(0.1 * len(words)):]]
    assert list(dict.fromkeys(splits.valid.sources)) == valid_words
    assert len(set(splits.test.sources)) == 20
    sides = [set(splits.train.sources), set(splits.valid.sources), set(splits.test.sources)]
    assert not (sides[0] & sides[1]) and not (sides[0] & sides[2]) and not (sides[1] & sides[2])
    for side in (splits.train, splits.valid, splits.test):
        for word in set(side.sources):
            expected = [t for s, t in zip(corpus.sources, corpus.targets) if s == word]
            assert [t for s, t in zip(side.sources, side.targets) if s == word] == expected
    assert sum(map(len, (splits.train, splits.valid, splits.test))) == len(corpus)


def test_split_by_pairs_can_separate_the_pronunciations_of_a_word():
    corpus = read_pronunciations(shared_data("cmudict/g014b2b.train"), limit=3000)
    splits = split_corpus(corpus, valid=0.3, seed=0)
    assert set(splits.train.sources) & set(splits.valid.sources)


@pytest.mark.parametrize("valid", [1.5, -1, "10", 1000])
def test_split_rejects_impossible_sizes(valid):
    corpus = Corpus(["a"] * 1000, ["b"] * 1000)
    with pytest.raises(AttncliError):
        split_corpus(corpus, valid=valid)


def write(tmp_path, name, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


BAD_TSV = (
    b"Go.\tVe.\n"  # 1 good
    b"only one column\n"  # 2 wrong number of columns
    b"a\tb\tc\td\n"  # 3 wrong number of columns
    b"\tvacio\n"  # 4 empty side
    b"empty \t  \n"  # 5 empty side
    b"caf\xe9\tcafe\n"  # 6 undecodable (Latin-1)
    b"\n"  # 7 blank: counted, not bad
    b"Hi.\tHola.\tCC-BY attribution\n"  # 8 good, third column allowed
)


def test_bad_tsv_lines_are_counted_and_skipped_with_a_warning(tmp_path, caplog):
    path = write(tmp_path, "bad.tsv", BAD_TSV)
    with caplog.at_level(logging.WARNING, logger="attncli.data"):
        corpus = read_tsv(path)
    assert corpus.sources == ["Go.", "Hi."]
    report = corpus.report
    assert report.bad_counts == {WRONG_COLUMNS: 2, EMPTY_SIDE: 2, UNDECODABLE: 1}
    assert report.bad_examples == {WRONG_COLUMNS: [2, 3], EMPTY_SIDE: [4, 5], UNDECODABLE: [6]}
    assert report.blank_lines == 1 and report.lines == 8 and report.pairs == 2
    (record,) = caplog.records
    assert "5 bad lines" in record.getMessage()
    assert "wrong number of columns: lines 2, 3" in record.getMessage()


def test_bad_tsv_lines_stop_a_strict_read_with_one_line(tmp_path):
    path = write(tmp_path, "bad.tsv", BAD_TSV)
    with pytest.raises(CorpusError) as raised:
        read_tsv(path, strict=True)
    assert isinstance(raised.value, AttncliError)
    message = str(raised.value)
    assert "\n" not in message
    assert "undecodable bytes: line 6" in message and "empty side: lines 4, 5" in message


def test_exact_column_count_rejects_the_attribution_column(tmp_path):
    path = write(tmp_path, "pairs.tsv", b"a\tb\nc\td\te\n")
    corpus = read_tsv(path, columns=2)
    assert corpus.sources == ["a"]
    assert corpus.report.bad_examples == {WRONG_COLUMNS: [2]}


def test_report_quotes_the_first_five_line_numbers(tmp_path):
    path = write(tmp_path, "many.tsv", b"ok\tok\n" + b"no tab\n" * 7)
    report = read_tsv(path).report
    assert report.bad_counts[WRONG_COLUMNS] == 7
    assert "lines 2, 3, 4, 5, 6, ..." in report.summary()


def test_parallel_files_of_different_lengths(tmp_path, caplog):
    source = write(tmp_path, "train.de", "eins\nzwei\n\ndrei\nvier\nfünf\n".encode())
    target = write(tmp_path, "train.en", b"one\n\n\nthree\n")
    with caplog.at_level(logging.WARNING, logger="attncli.data"):
        corpus = read_parallel(source, target)
    assert corpus.sources == ["eins", "drei"]
    assert corpus.targets == ["one", "three"]
    assert corpus.report.bad_counts == {EMPTY_SIDE: 1, UNPAIRED: 2}
    assert corpus.report.bad_examples == {EMPTY_SIDE: [2], UNPAIRED: [5, 6]}
    assert corpus.report.blank_lines == 1
    assert "mismatched line counts: lines 5, 6" in caplog.records[0].getMessage()
    with pytest.raises(CorpusError, match="mismatched line counts"):
        read_parallel(source, target, strict=True)


def test_parallel_undecodable_line(tmp_path):
    source = write(tmp_path, "a.de", b"gut\nschl\xfcssel\n")
    target = write(tmp_path, "a.en", b"good\nkey\n")
    corpus = read_parallel(source, target)
    assert corpus.sources == ["gut"]
    assert corpus.report.bad_examples == {UNDECODABLE: [2]}


def test_pronunciation_lines_without_phonemes(tmp_path):
    path = write(tmp_path, "dict", b"CAT\tK AE T\nDOG\t\nBIRD B ER D\n")
    corpus = read_pronunciations(path)
    assert corpus.sources == ["CAT"]
    assert corpus.report.bad_counts == {EMPTY_SIDE: 1, WRONG_COLUMNS: 1}


def test_missing_file_is_a_one_line_error(tmp_path):
    with pytest.raises(CorpusError, match="cannot read"):
        read_tsv(tmp_path / "nothing.tsv")


def test_splits_from_separate_files():
    data = "multi30k/{}.{}"
    splits = read_splits(
        train=(shared_data(data.format("train", "de")), shared_data(data.format("train", "en"))),
        valid=(shared_data(data.format("val", "de")), shared_data(data.format("val", "en"))),
        test=(
            shared_data(data.format("test_2016_flickr", "de")),
            shared_data(data.format("test_2016_flickr", "en")),
        ),
        format="parallel",
    )
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (29000, 1014, 1000)
    assert splits.train.sources[0].startswith("Zwei junge weiße Männer")


def test_splits_carved_from_one_file():
    path = shared_data("cmudict/g014b2b.train")
    splits = read_splits(path, valid_size=0.2, seed=1, format="pronunciations", limit=500)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (400, 100, 0)
    with_test = read_splits(path, test=shared_data("cmudict/g014b2b.test"), valid_size=50,
                            format="pronunciations", limit=500)
    assert (len(with_test.train), len(with_test.valid), len(with_test.test)) == (450, 50, 500)


def test_unknown_format_and_single_parallel_path():
    with pytest.raises(AttncliError, match="format"):
        read_corpus("x", format="xml")
    with pytest.raises(AttncliError, match="two files"):
        read_corpus("train.de", format="parallel")


def test_truncated_gzip_is_a_one_line_error(tmp_path):
    whole = gzip.compress(b"a\tb\n" * 1000)
    path = write(tmp_path, "cut.tsv.gz", whole[: len(whole) // 2])
    with pytest.raises(CorpusError, match="cannot read"):
        read_tsv(path)


def test_head_keeps_the_first_pairs_and_the_report():
    corpus = read_tsv(shared_data("spa-eng/spa.txt"), limit=50)
    head = corpus.head(5)
    assert head.sources == corpus.sources[:5] and head.targets == corpus.targets[:5]
    assert head.report is corpus.report
