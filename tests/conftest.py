import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Fixtures built once per module (a trained run, an export, a server): their modules'
# tests go to one pytest-xdist worker together.
SHARED_SCOPES = {"module", "class", "package"}


def pytest_itemcollected(item):
    """Under `--dist loadgroup`, a test that uses a module-, class- or package-scoped
    fixture joins the `xdist_group` named after its file, unless it names a group itself.

    `loadgroup` hands ungrouped tests to the workers one by one, so consecutive tests of
    one module ran on both workers and each worker built the module's fixtures: two
    trainings or two exports where one was meant. This runs as each test is collected,
    before pytest-xdist reads the groups; xdist joins every `xdist_group` of a test into
    one name, hence "unless". (pytest 9.2 lost every group: pyproject.toml keeps pytest
    below it until pytest-xdist follows.)
    """
    if item.get_closest_marker("xdist_group") is not None:
        return
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is None:
        return
    scopes = {definition.scope for definitions in fixtures.name2fixturedefs.values()
              for definition in definitions}
    if scopes & SHARED_SCOPES:
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
