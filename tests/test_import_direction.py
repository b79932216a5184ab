"""Imports run one way: the model floor (`attncli/model/`) never imports the search floor.

Read from the source (every import statement, inside functions too), not from what a
Python session happens to have imported.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attncli"


def imported_modules(source, module):
    """The absolute names of the modules `source` (the text of `module`) imports,
    wherever the statement stands; `from X import name` counts `X.name` as well."""
    package = module.rsplit(".", 1)[0]
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


def test_the_model_floor_never_imports_the_search_floor():
    offending = []
    for path in sorted((PACKAGE / "model").rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for name in imported_modules(path.read_text("utf-8"), module):
            if name == "attncli.search" or name.startswith("attncli.search."):
                offending.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert not offending, offending
