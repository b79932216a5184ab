"""Imports run one way: down the floors of `attncli/` (docs/architecture.md, Layout).

A module imports modules of its own floor and of the floors below it, never above: no
two floors import each other (a circle), and a floor can be read, tested and changed
knowing only what lies below it. Every import statement counts, inside functions too (a
lazy import is an arrow all the same), read from the source with `ast`, not from what a
Python session happens to have imported. The arrows that go up are listed in `UPWARD`,
each with its reason; `--help`'s lazy imports need none, as they are the command line's,
the top floor's.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Bottom first. `layers` is the package of Keras layers beside `attncli`; "" holds the
#: modules at the top of `attncli/` that every floor reads (errors, files, the tables of
#: scores and attentions). Training sits on search: it validates by translating.
FLOORS = ("layers", "", "config", "data", "model", "search", "training", "alignment",
          "export", "serve", "cli")

#: The arrows that go up a floor, (importing module, imported module): why each does.
#: None today; an entry must say why its import cannot move down.
UPWARD = {}


def module_name(path):
    """`attncli.data.tokenization` of `.../attncli/data/tokenization.py` (a package by the
    name of its `__init__.py`'s folder)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def floor(module):
    """The floor of a module of `attncli` or `layers` (None for any other package);
    `attncli.__main__`, which runs the command line, is on the command line's."""
    parts = module.split(".")
    if parts[0] == "layers":
        return "layers"
    if parts[0] != "attncli":
        return None
    if len(parts) == 1 or parts[1] not in FLOORS:
        return "cli" if parts[1:] == ["__main__"] else ""
    return parts[1]


def imported_modules(source, module, is_package=False):
    """The absolute names of the modules `source` (the text of `module`, a package's
    `__init__.py` when `is_package`) imports, wherever the statement stands; `from X
    import name` counts `X.name` as well (it may be a module)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names)
    return names


def arrows():
    """Every (importing module, imported module) of `attncli` and `layers`."""
    found = []
    for path in sorted([*(ROOT / "attncli").rglob("*.py"), *(ROOT / "layers").rglob("*.py")]):
        module = module_name(path)
        source = path.read_text("utf-8")
        for name in imported_modules(source, module, path.name == "__init__.py"):
            found.append((module, name))
    return found


def upward(importer, imported):
    """Whether `importer` importing `imported` goes up a floor (`imported` may be a name
    that `from X import name` took from module `X`: it is on `X`'s floor)."""
    above = floor(imported)
    return above is not None and FLOORS.index(above) > FLOORS.index(floor(importer))


def allows(exception, importer, imported):
    """Whether the `UPWARD` pair `exception` is the arrow (`imported` its module, or a
    name in it)."""
    module, target = exception
    return importer == module and (imported == target or imported.startswith(target + "."))


def test_the_walk_sees_every_form_of_import():
    source = (
        "import attncli.search.decoding\n"
        "def later():\n"
        "    from attncli.search.translation import Translator\n"
        "    from attncli import search\n"
        "    from ..search import loading\n"
    )
    found = imported_modules(source, "attncli.model.example")
    assert "attncli.search.decoding" in found
    assert "attncli.search.translation" in found
    assert "attncli.search" in found
    assert "attncli.search.loading" in found
    assert imported_modules("from . import links", "attncli.alignment", is_package=True) == [
        "attncli.alignment", "attncli.alignment.links"]


def test_an_arrow_up_is_told_from_one_down():
    assert upward("attncli.config.data", "attncli.data.tokenization.Tokenizer")
    assert upward("attncli.model.saving", "attncli.search.loading")
    assert upward("layers.luong_attention", "attncli.errors")
    assert upward("attncli.errors", "attncli.config")
    assert not upward("attncli.data.tokenization", "attncli.config.data")
    assert not upward("attncli.training.validation", "attncli.search.translation")
    assert not upward("attncli.__main__", "attncli.cli.app")
    assert not upward("attncli.data.levels", "tensorflow")
    exception = ("attncli.data.alignments", "attncli.alignment.links")
    assert allows(exception, "attncli.data.alignments", "attncli.alignment.links.parse_pharaoh")
    assert not allows(exception, "attncli.data.alignments", "attncli.alignment.extraction")
    assert not allows(exception, "attncli.data.pipeline", "attncli.alignment.links")


def test_imports_never_go_up_a_floor():
    up = sorted({arrow for arrow in arrows() if upward(*arrow)})
    assert [arrow for arrow in up if not any(allows(pair, *arrow) for pair in UPWARD)] == []
    # An exception that no import needs any more comes off the list.
    assert [pair for pair in UPWARD if not any(allows(pair, *arrow) for arrow in up)] == []


def test_every_package_of_attncli_is_a_floor():
    packages = {path.parent.name for path in (ROOT / "attncli").glob("*/__init__.py")}
    assert packages == set(FLOORS) - {"", "layers"}


def test_no_test_file_imports_another():
    """What several test files share is a module of tests/ itself (tests/conftest.py): a
    test file read alone names everything it needs, and moving one breaks no other."""
    tests = ROOT / "tests"
    names = {path.stem for path in tests.rglob("test_*.py")}
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            imported = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ROOT)}: {name}" for name in imported
                      if name.rsplit(".", 1)[-1] in names]
    assert found == []
