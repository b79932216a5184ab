"""The atomic writer: a reader sees the old file or the new one, and nothing is left behind."""

import json
import os
from pathlib import Path

import pytest

from attncli import files
from attncli.files import (
    new_directory,
    replace_directory,
    write_atomically,
    write_json_atomically,
    write_text_atomically,
)


def test_text_json_and_bytes_are_written_as_given(tmp_path):
    write_text_atomically(tmp_path / "a.txt", "¿Dónde?\n")
    write_json_atomically(tmp_path / "b.json", {"z": 1, "a": [2]})
    write_atomically(tmp_path / "c.bin", b"\x00\xff")
    assert (tmp_path / "a.txt").read_bytes() == "¿Dónde?\n".encode("utf-8")
    assert (tmp_path / "b.json").read_text() == '{\n  "a": [\n    2\n  ],\n  "z": 1\n}\n'
    assert json.loads((tmp_path / "b.json").read_text()) == {"z": 1, "a": [2]}
    assert (tmp_path / "c.bin").read_bytes() == b"\x00\xff"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt", "b.json", "c.bin"]


def test_a_new_file_has_the_permissions_of_any_new_file(tmp_path):
    umask = os.umask(0o022)
    try:
        write_text_atomically(tmp_path / "a.txt", "x")
    finally:
        os.umask(umask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failure_midway_keeps_the_old_file_and_leaves_no_temporary_file(
    tmp_path, monkeypatch, failing
):
    target = tmp_path / "vocab.txt"
    target.write_text("old\n")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, failing, fail)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomically(target, "new\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
    assert [path.name for path in tmp_path.iterdir()] == ["vocab.txt"]


def test_two_writers_of_one_file_do_not_share_a_temporary_file(tmp_path, monkeypatch):
    """A second write starts while the first holds its finished temporary file."""
    target = tmp_path / "run.json"
    replace = os.replace
    sources = []

    def replace_after_another_write(source, destination):
        sources.append(os.path.basename(source))
        if len(sources) == 1:
            write_text_atomically(target, "second\n")
        replace(source, destination)

    monkeypatch.setattr(files.os, "replace", replace_after_another_write)
    write_text_atomically(target, "first\n")
    assert sources[0] != sources[1]
    assert target.read_text() == "first\n"
    assert [path.name for path in tmp_path.iterdir()] == ["run.json"]


def test_a_directory_is_replaced_whole_or_not_at_all(tmp_path):
    model = tmp_path / "model"
    with replace_directory(model) as staging:
        write_text_atomically(staging / "config.json", "1")
    assert (model / "config.json").read_text() == "1"
    with pytest.raises(RuntimeError):
        with replace_directory(model) as staging:
            write_text_atomically(staging / "config.json", "2")
            raise RuntimeError("interrupted")
    assert (model / "config.json").read_text() == "1"
    with replace_directory(model) as staging:
        write_text_atomically(staging / "weights", "3")
    assert sorted(path.name for path in model.iterdir()) == ["weights"]
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_a_new_directory_goes_where_nothing_or_an_empty_directory_was(tmp_path):
    for name, make in (("absent", None), ("empty", Path.mkdir)):
        destination = tmp_path / "exports" / name
        if make is not None:
            destination.parent.mkdir(exist_ok=True)
            make(destination)
        with new_directory(destination) as staging:
            assert staging.parent == destination.parent
            write_text_atomically(staging / "saved_model.pb", name)
            assert not (destination / "saved_model.pb").exists()
        assert (destination / "saved_model.pb").read_text() == name
    assert sorted(path.name for path in (tmp_path / "exports").iterdir()) == ["absent", "empty"]


@pytest.mark.parametrize("occupant", ["file", "directory with a file", "link"])
def test_a_new_directory_never_replaces_what_is_there(tmp_path, occupant):
    destination = tmp_path / "exported"
    if occupant == "file":
        destination.write_text("mine")
    elif occupant == "link":
        (tmp_path / "elsewhere").mkdir()
        destination.symlink_to(tmp_path / "elsewhere")
    else:
        destination.mkdir()
        (destination / "notes.txt").write_text("mine")
    before = sorted(path.name for path in tmp_path.iterdir())
    with pytest.raises(FileExistsError):
        with new_directory(destination):
            pass
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def test_a_destination_filled_while_writing_is_kept_and_the_new_one_dropped(tmp_path):
    destination = tmp_path / "exported"
    with pytest.raises(FileExistsError):
        with new_directory(destination) as staging:
            write_text_atomically(staging / "saved_model.pb", "new")
            destination.mkdir()
            (destination / "notes.txt").write_text("mine")
    assert [path.name for path in destination.iterdir()] == ["notes.txt"]
    assert [path.name for path in tmp_path.iterdir()] == ["exported"]


def test_a_failed_new_directory_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with new_directory(tmp_path / "exported") as staging:
            write_text_atomically(staging / "saved_model.pb", "half")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
