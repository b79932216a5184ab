"""Typed, validated configuration read from YAML.

A configuration is a tree of dataclasses. `from_mapping` builds one from the plain
dict that `yaml.safe_load` gives, checking every value against the field's type
annotation; an unknown key or a bad value raises `ConfigError` naming the key's
full path, what was given and what is allowed. Nothing in a YAML file is ignored.

Supported field types: `bool`, `int`, `float`, `str`, `typing.Literal[...]`,
`X | None`, `list[X]` / `tuple[X, ...]`, and nested dataclasses. A dataclass may
check relations between its fields in `__post_init__` by raising `ValueError`;
the message is reported with the dataclass's path.
"""

import dataclasses
import difflib
import functools
import math
import re
import types
import typing
from pathlib import Path

import yaml

from attncli.errors import AttncliError, clipped, shown
from attncli.files import write_text_atomically


class ConfigError(AttncliError):
    """A configuration file or override that cannot be used as it is."""


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


# How many more values aliases may add to a document than it writes out. Aliases
# repeat a value; nested, they multiply it (a "billion laughs" document of a few
# lines stands for 10^9 values), which every later pass over it (validation, an
# error message) would pay for.
MAX_ALIAS_EXPANSION = 100_000

# How deeply lists and mappings may nest in a document. A configuration nests three or
# four levels; every pass over a value (PyYAML's own included) recurses once per level,
# and a few hundred levels in a kilobyte would exhaust Python's stack.
MAX_DEPTH = 32


class _AliasExpansion(yaml.MarkedYAMLError):
    fix = "write the values out, or use fewer nested aliases"


class _TooDeep(yaml.MarkedYAMLError):
    fix = f"attncli reads at most {MAX_DEPTH} levels"


class _Loader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a key given twice in one mapping, reads `1e-3`, and
    refuses a document whose aliases expand it past `MAX_ALIAS_EXPANSION` values or
    whose lists and mappings nest deeper than `MAX_DEPTH`.

    PyYAML keeps the last of two equal keys without a word, and follows YAML 1.1, where
    a float needs a dot (`1e-3` is a string); YAML 1.2 and every user read it as 0.001.
    """

    depth = 0

    def compose_node(self, parent, index):
        # Composing recurses once per level: counted here, before the stack runs out.
        if self.depth >= MAX_DEPTH and (
            self.check_event(yaml.SequenceStartEvent) or self.check_event(yaml.MappingStartEvent)
        ):
            raise _TooDeep(
                problem=f"lists and mappings nest deeper than {MAX_DEPTH} levels",
                problem_mark=self.peek_event().start_mark,
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_document(self, node):
        _check_expansion(node)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            # Merge keys (`<<: *base`) bring defaults that the mapping may override.
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(
                    problem=f"the key {shown(key)} is given twice", problem_mark=key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_MERGE = "tag:yaml.org,2002:merge"


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _check_expansion(root):
    """Refuse a node graph whose aliases stand for too many values, or that holds itself.

    Each node's expanded size (itself and everything under it, aliases followed) is
    counted once and remembered, so a bomb is measured without being expanded.
    """
    sizes, open_nodes = {}, set()

    def size(node):
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise _AliasExpansion(
                problem="a value contains itself through an alias", problem_mark=node.start_mark
            )
        open_nodes.add(key)
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        total = 1
        for child in children:
            total += size(child)
            if total - len(sizes) > MAX_ALIAS_EXPANSION:
                raise _AliasExpansion(
                    problem=f"aliases expand the document past {MAX_ALIAS_EXPANSION:,} values",
                    problem_mark=child.start_mark,
                )
        open_nodes.discard(key)
        sizes[key] = total
        return total

    size(root)


def _load(text):
    return yaml.load(text, Loader=_Loader)


def safe_load(text):
    """`yaml.safe_load` with this module's checks (see `_Loader`).

    Raises:
        yaml.YAMLError: as `yaml.safe_load`, with `.fix` (what to do) when the
            document is refused for its aliases.
    """
    return _load(text)


def from_mapping(cls, mapping, path=""):
    """Build dataclass `cls` from `mapping`, validating every key and value.

    Args:
        cls: a dataclass type whose fields all have defaults or appear in `mapping`.
        mapping: a dict (from YAML), or None for all defaults.
        path: dotted prefix used in error messages.

    Returns:
        An instance of `cls`.

    Raises:
        ConfigError: on an unknown key, a missing required key or a bad value.
    """
    where = path or "the configuration"
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, dict):
        raise ConfigError(
            f"{where} must be a mapping of keys to values. {_received(path, mapping)}"
        )
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [key for key in mapping if key not in fields]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), fields, n=1)
        meant = f"did you mean {_join(path, close[0])}? " if close else ""
        raise ConfigError(
            f"{_join(path, clipped(str(unknown[0])))}: unknown key; {meant}allowed keys "
            f"here: {', '.join(fields)}"
        )
    hints = typing.get_type_hints(cls)
    values = {}
    for name, field in fields.items():
        if name in mapping:
            values[name] = _convert(hints[name], mapping[name], _join(path, name))
        elif (
            field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING
        ):
            raise ConfigError(f"{_join(path, name)}: required key is missing")
    try:
        return cls(**values)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None


def to_mapping(config):
    """The plain dict (YAML-ready) of a configuration dataclass."""
    mapping = dataclasses.asdict(config)
    return _plain(mapping)


def load_yaml(path):
    """Read a YAML file into a dict, turning every failure into a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file; check the path") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read the config file ({error})") from None
    try:
        mapping = _load(text)
    except yaml.YAMLError as error:
        if _looks_like_data(text):
            raise ConfigError(_data_not_config(path)) from None
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        fix = getattr(error, "fix", "fix the YAML syntax")
        raise ConfigError(f"{path}: {problem}{at}; {fix}") from None
    if mapping is None:
        return {}
    if isinstance(mapping, str) or (not isinstance(mapping, dict) and _looks_like_data(text)):
        raise ConfigError(_data_not_config(path))
    if not isinstance(mapping, dict):
        raise ConfigError(
            f"{path}: expected a mapping of sections at the top. "
            f"{_received('', mapping)}"
        )
    return mapping


def _looks_like_data(text):
    """Whether `text` reads as a corpus of tab-separated columns rather than YAML: every
    one of its first lines (blank lines and comments aside) holds a tab between words."""
    lines = [line.strip() for line in text.splitlines()[:20]]
    lines = [line for line in lines if line and not line.startswith("#")]
    return bool(lines) and all("\t" in line for line in lines)


def _data_not_config(path):
    """What to say of a data file given where a config goes (plain text parses as one
    YAML string, tab-separated pairs as a YAML error about a tab)."""
    return (
        f"{path} looks like a data file, not a config: give a config (attncli configs lists "
        "the shipped ones) and the data with data.train / --data-dir"
    )


def save_yaml(config, path):
    """Write the resolved configuration as YAML, atomically."""
    write_text_atomically(path, yaml.safe_dump(to_mapping(config), sort_keys=False))


def apply_overrides(mapping, overrides):
    """Apply `key.path=value` overrides to a (nested) config mapping, in place.

    Values are parsed as YAML scalars or flow collections, so `epochs=3` gives an
    int, `score=general` a string and `sizes=[1, 2]` a list.

    Args:
        mapping: the dict read from YAML.
        overrides: iterable of strings `dotted.key=value`.

    Returns:
        `mapping`, for chaining.
    """
    for override in overrides:
        key, separator, text = override.partition("=")
        key = key.strip()
        if not separator or not key or any(not part for part in key.split(".")):
            raise ConfigError(
                f"--set {shown(override)}: expected KEY.PATH=VALUE, "
                "e.g. --set training.epochs=3"
            )
        try:
            value = _load(text) if text.strip() else ""
        except (_AliasExpansion, _TooDeep) as error:
            raise ConfigError(f"--set {shown(key)}: {error.problem}; {error.fix}") from None
        except yaml.YAMLError:
            raise ConfigError(
                f"--set {shown(override)}: the value is not valid YAML; quote it"
            ) from None
        node = mapping
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part, {})
            if not isinstance(child, dict):
                prefix = ".".join(parts[: depth + 1])
                raise ConfigError(
                    f"--set {shown(override)}: {prefix} is a value, not a section"
                )
            # A copy: a YAML alias (`target: *side`) shares its section with the anchor,
            # and an override of one side must not change the other.
            node[part] = child = dict(child)
            node = child
        node[parts[-1]] = value
    return mapping


def _convert(annotation, value, path):
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if dataclasses.is_dataclass(annotation):
        return from_mapping(annotation, value, path)
    if origin is typing.Literal:
        if value not in arguments:
            raise ConfigError(_must_be(path, _expected(annotation), value))
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in arguments:
            return None
        options = [a for a in arguments if a is not type(None)]
        if len(options) == 1:
            return _convert(options[0], value, path)
        for option in options:
            try:
                return _convert(option, value, path)
            except ConfigError:
                continue
        expected = " or ".join(_expected(option) for option in options)
        raise ConfigError(_must_be(path, expected, value))
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(_must_be(path, "a list", value))
        item_type = arguments[0] if arguments else typing.Any
        items = [_convert(item_type, item, f"{path}[{i}]") for i, item in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if annotation is typing.Any:
        return value
    if annotation in _SCALARS:
        accepted, _ = _SCALARS[annotation]
        if not isinstance(value, accepted) or (isinstance(value, bool) and annotation is not bool):
            raise ConfigError(_must_be(path, _expected(annotation), value))
        if annotation is int and not _INT64[0] <= value <= _INT64[1]:
            raise ConfigError(_must_be(path, "an integer between -2**63 and 2**63 - 1", value))
        if annotation is float:
            try:
                number = float(value)
            except OverflowError:  # an integer of hundreds of digits
                number = math.inf
            # NaN passes every range check (each comparison is False) and an infinity
            # passes every lower bound: neither is a setting.
            if not math.isfinite(number):
                raise ConfigError(_must_be(path, "a finite number", value))
            return number
        return value
    raise TypeError(f"{path}: unsupported field type {annotation!r}")


# Every integer setting fits TensorFlow's int64.
_INT64 = (-(2**63), 2**63 - 1)

# The scalar field types: the Python types a YAML value may have, and their name in
# messages. `bool` is an `int` in Python but never a valid integer or number here.
_SCALARS = {
    bool: (bool, "true or false"),
    int: (int, "an integer"),
    float: ((int, float), "a number"),
    str: (str, "a string"),
}


def check_choices(config):
    """Check every `Literal` field of dataclass instance `config` against its type.

    A dataclass calls it from `__post_init__`, so that one built in code is held to
    the values its annotations allow, as one read by `from_mapping` is: the allowed
    values are written once, in the annotation.

    Raises:
        ValueError: `"NAME must be one of A, B. Received: NAME=VALUE"`.
    """
    for name, allowed in _choices(type(config)).items():
        value = getattr(config, name)
        if value not in allowed:
            raise ValueError(_must_be(name, _expected(typing.Literal[allowed]), value))


@functools.cache
def _choices(cls):
    """`{field name: allowed values}` of the fields of `cls` typed `Literal[...]`
    (or `Literal[...] | None`, where None is allowed too)."""
    choices = {}
    for name, annotation in typing.get_type_hints(cls).items():
        options = (
            typing.get_args(annotation)
            if typing.get_origin(annotation) in (typing.Union, types.UnionType)
            else (annotation,)
        )
        allowed = []
        for option in options:
            if typing.get_origin(option) is typing.Literal:
                allowed += typing.get_args(option)
            elif option is type(None):
                allowed.append(None)
            else:
                break
        else:
            if any(value is not None for value in allowed):
                choices[name] = tuple(allowed)
    return choices


def _plain(value):
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _join(path, key):
    return f"{path}.{key}" if path else key


def _must_be(path, expected, value):
    return f"{path} must be {expected}. {_received(path, value)}"


def _received(path, value):
    """Keras's `Received: name=value`, the value's repr shortened if long."""
    return f"Received: {path}={shown(value)}" if path else f"Received: {shown(value)}"


def _expected(annotation):
    if typing.get_origin(annotation) is typing.Literal:
        values = typing.get_args(annotation)
        listed = ", ".join(str(value) for value in values if value is not None)
        return f"one of {listed}" + (" or null" if None in values else "")
    if annotation in _SCALARS:
        return _SCALARS[annotation][1]
    return getattr(annotation, "__name__", str(annotation))
