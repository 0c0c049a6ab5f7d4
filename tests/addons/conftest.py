"""popxl-addons (unmodified) is not on PyPI: the tests find its released branches in
../shared/third_party from the repository root (or any parent directory's shared/third_party):
sdk-release-3.1 in popxl-addons/, the others in popxl-addons-branches/<branch>/. A branch that is
absent is skipped with the reason.

The `addons` fixture is parametrised by branch: every test runs against sdk-release-3.1 and the
tests marked `every_branch` (a representative case of each area) against every branch by default;
the rest run against the other branches under the slow mark (`-m slow`). One branch is imported
at a time: switching drops the previous branch's modules."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DEFAULT_BRANCH = "sdk-release-3.1"
BRANCHES = ("sdk-release-3.0", "sdk-release-3.1", "sdk-release-3.1_a", "sdk-release-3.2", "sdk-release-3.3.0",
            "sdk-release-3.4")


def _third_party():
    d = ROOT
    while True:
        for candidate in (os.path.join(d, "shared", "third_party"), os.path.join(d, "..", "shared", "third_party")):
            if os.path.isdir(candidate):
                return os.path.abspath(candidate)
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def addons_path(branch: str = DEFAULT_BRANCH):
    """The directory holding the `popxl_addons` package of `branch`, or None."""
    tp = _third_party()
    if tp is None:
        return None
    sub = "popxl-addons" if branch == DEFAULT_BRANCH else os.path.join("popxl-addons-branches", branch)
    path = os.path.join(tp, sub)
    return path if os.path.isdir(os.path.join(path, "popxl_addons")) else None


def _drop_loaded_addons():
    for name in [m for m in sys.modules if m == "popxl_addons" or m.startswith("popxl_addons.")]:
        del sys.modules[name]
    for branch in BRANCHES:
        path = addons_path(branch)
        while path is not None and path in sys.path:
            sys.path.remove(path)


def pytest_collection_modifyitems(config, items):
    """Off the default branch, only the `every_branch` tests run without -m slow."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        branch = callspec.params.get("addons") if callspec is not None else None
        if branch is not None and branch != DEFAULT_BRANCH and item.get_closest_marker("every_branch") is None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", params=BRANCHES)
def addons(request):
    branch = request.param
    path = addons_path(branch)
    if path is None:
        pytest.skip(f"popxl-addons {branch} is not here: put graphcore/popxl-addons ({branch}) in "
                    f"../shared/third_party (it is not on PyPI)")
    for mod in ("more_itertools", "git"):
        try:
            __import__(mod)
        except ImportError:
            pytest.skip(f"popxl-addons needs {mod}: pip install -e '.[addons]'")
    _drop_loaded_addons()
    sys.path.insert(0, path)
    import popxl_addons
    import popxl_addons.layers  # noqa: F401  (as scripts do: from popxl_addons.layers import Linear)
    assert os.path.dirname(os.path.dirname(popxl_addons.__file__)) == path
    return popxl_addons


@pytest.fixture
def addons_branch(addons, request):
    """The branch the `addons` fixture imported (for the few documented differences between them)."""
    return request.node.callspec.params["addons"]


def needs(addons, module: str, attr: str = None):
    """Skip, with the reason, when the branch under test has no `module` (or no `attr` in it): the
    feature came in a later popxl-addons release."""
    import importlib

    try:
        m = importlib.import_module(module)
    except ImportError:
        m = None
    if m is None or (attr is not None and not hasattr(m, attr)):
        what = f"{module}.{attr}" if attr else module
        pytest.skip(f"{what} is not in popxl-addons {os.path.basename(os.path.dirname(os.path.dirname(addons.__file__)))}")
    return m


@pytest.fixture(autouse=True)
def _small_target(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")
