"""Typed, validated configuration.

A configuration is a tree of dataclasses. `from_mapping` builds one from the plain
dict that YAML gives (`attncli.config.yaml_files`), checking every value against the
field's type annotation; an unknown key or a bad value raises `ConfigError` naming the
key's full path, what was given and what is allowed. Nothing in a YAML file is ignored.

Supported field types: `bool`, `int`, `float`, `str`, `typing.Literal[...]`,
`X | None`, `list[X]` / `tuple[X, ...]`, and nested dataclasses. A dataclass may
check relations between its fields in `__post_init__` by raising `ValueError`;
the message is reported with the dataclass's path.
"""

import dataclasses
import difflib
import functools
import math
import types
import typing

from attncli.errors import AttncliError, clipped, shown


class ConfigError(AttncliError):
    """A configuration file or override that cannot be used as it is."""


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
