"""The run configurations shipped with attncli, found by name from any folder.

    resolve_config("transformer")           # the installed configs/transformer.yaml
    resolve_config("configs/transformer.yaml")  # the same, when no such local file exists

The configs are package data (`attncli/configs/*.yaml`), so they are there after a
plain `pip install`, outside a checkout. A file of the user's own always comes first.
No TensorFlow here.
"""

from importlib import resources
from pathlib import Path

from attncli.config.schema import ConfigError

_SUFFIXES = (".yaml", ".yml")


def shipped_configs():
    """The shipped configs, by name (`"transformer"`), as paths, in name order."""
    folder = Path(str(resources.files("attncli") / "configs"))
    return {path.stem: path for path in sorted(folder.glob("*.yaml"))}


def resolve_config(path):
    """The file `path` names: itself when it is a file, else the shipped config it names
    (a folder named `default` does not hide the shipped `default`).

    A bare name (`transformer`, `transformer.yaml`) and a path under `configs/`
    (`configs/transformer.yaml`, as the README writes them) name a shipped config.

    Raises:
        ConfigError: when `path` is no file and names no shipped config.
    """
    given = Path(path)
    if given.is_file():
        return given
    shipped = shipped_configs()
    bare = given.parent in (Path("."), Path("configs"))
    name = given.stem if given.suffix in _SUFFIXES else given.name
    if bare and name in shipped:
        return shipped[name]
    raise ConfigError(
        f"{path}: no such config file, nor a shipped config of that name (shipped: "
        f"{', '.join(shipped)}; `attncli configs` describes them)"
    )


def describe(path):
    """A config's description: the first sentence of its opening comment, whole (its
    lines joined up to the one that ends with a full stop)."""
    words = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.startswith("#"):
                break
            words.extend(line[1:].split())
            if line.rstrip().endswith("."):
                break
    return " ".join(words)
