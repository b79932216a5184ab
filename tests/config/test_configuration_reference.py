"""docs/configuration.md is what `python -m attncli.config.reference` generates from the
schema: every key of every section, with its default, allowed values and meaning."""

import dataclasses
import typing

from attncli.config import reference
from attncli.config.run import RunConfig


def test_the_reference_is_up_to_date():
    written = reference.DOCUMENT.read_text(encoding="utf-8")
    assert written == reference.render(), (
        "docs/configuration.md is out of date: run python -m attncli.config.reference"
    )


def keys(cls, path=""):
    """Every configurable key below `cls`, from the dataclass fields themselves: a
    section that may be null (`training.guided_alignment`) is a key and a section, and
    a key of a section without a default (its `weight`) is required, so listed too."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        annotation = hints[field.name]
        options = [option for option in typing.get_args(annotation) if option is not type(None)]
        if dataclasses.is_dataclass(annotation):
            yield from keys(annotation, f"{path}{field.name}.")
            continue
        if len(options) == 1 and dataclasses.is_dataclass(options[0]):
            yield from keys(options[0], f"{path}{field.name}.")
        if path or field.default is not dataclasses.MISSING or \
                field.default_factory is not dataclasses.MISSING:
            yield f"{path}{field.name}"


def test_every_key_has_a_row_with_a_default_and_a_meaning():
    rows = {}
    for _, _, section in reference.sections():
        for key, default, allowed, meaning in section:
            rows[key.replace("{source,target}", "source")] = (default, allowed, meaning)
    expected = set(keys(RunConfig)) - {key for key in keys(RunConfig) if ".target." in key}
    assert set(rows) == expected
    for key, (default, allowed, meaning) in rows.items():
        assert default and allowed and meaning, key


def test_allowed_values_come_from_the_annotation():
    assert reference.allowed_values(typing.Literal["a", "b"] | None) == "`a`, `b` or `null`"
    assert reference.allowed_values(int | float) == "an integer or a number"
    assert reference.allowed_values(bool) == "`true`, `false`"


def test_a_comma_entry_documents_each_of_its_names():
    class Example:
        """Summary.

        Args:
            first, second: shared text
                on two lines.
            third: its own.

        Returns:
            nothing.
        """

    assert reference.field_meanings(Example) == {
        "first": "shared text on two lines.", "second": "shared text on two lines.",
        "third": "its own."}


def test_every_contents_link_names_a_heading_as_github_slugs_it():
    """GitHub's heading anchors: lower case, punctuation other than `-` and `_` dropped,
    spaces made hyphens (written here from that rule, not from the generator)."""
    import re

    text = reference.render()
    headings = re.findall(r"^## (.+)$", text, re.M)
    slugs = {"".join(c for c in h.lower() if c.isalnum() or c in " -_").replace(" ", "-")
             for h in headings}
    links = re.findall(r"^- \[`[^`]+`\]\(#([^)]+)\)$", text, re.M)
    assert links and set(links) <= slugs, set(links) - slugs
