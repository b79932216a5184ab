import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The test files live in one folder per floor they test (tests/layers/, tests/model/, ...),
# with no `__init__.py`: pytest imports each by its basename, unique across the folders.
# No test file imports another (tests/top/test_import_direction.py checks it): what several
# share is a module of tests/ itself (`small_models`, `browser`, `fake_server`, ...), found
# on sys.path as this file's folder.

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


def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup`, the slow tests of no group are collected first.

    pytest-xdist hands out the groups first (most tests first), then every other test one by
    one in the order collected, the folders' and files' alphabetical order: the run would
    end on whatever slow tests the last files hold (test_workflow's trainings, tens of
    seconds each), one worker busy with them while the other has nothing left. Collected
    first, they go out right after the groups, and the run ends on tests of a second or
    less. Their order among themselves, and every other test's, is kept.
    """
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    items.sort(key=lambda item: not (item.get_closest_marker("slow") is not None
                                     and item.get_closest_marker("xdist_group") is None))
