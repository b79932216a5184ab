"""Configuration as YAML: a file or a `--set` value read with the safe loader's checks,
and the resolved configuration written back.

Every failure to read is a `ConfigError` saying where and what to do: a missing or
unreadable file, invalid YAML, a key given twice, a document whose aliases expand too
far or that nests too deeply (`_Loader`), a data file given for a config. The mapping
read is validated by `attncli.config.schema.from_mapping`.
"""

import re
from pathlib import Path

import yaml

from attncli.config.schema import ConfigError, to_mapping
from attncli.errors import shown
from attncli.files import write_text_atomically


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
            f"Received: {shown(mapping)}"
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
