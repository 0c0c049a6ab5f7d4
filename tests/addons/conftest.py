"""popxl-addons (unmodified, SDK 3.1 branch) is not on PyPI: the tests find it in
../shared/third_party/popxl-addons from the repository root (or any parent directory's
shared/third_party/popxl-addons) and skip with the reason when it is absent."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def addons_path():
    d = ROOT
    while True:
        for candidate in (os.path.join(d, "shared", "third_party", "popxl-addons"),
                          os.path.join(d, "..", "shared", "third_party", "popxl-addons")):
            if os.path.isdir(os.path.join(candidate, "popxl_addons")):
                return os.path.abspath(candidate)
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


@pytest.fixture(scope="session")
def addons():
    path = addons_path()
    if path is None:
        pytest.skip("popxl-addons is not here: put graphcore/popxl-addons (sdk-release-3.1) in "
                    "../shared/third_party/popxl-addons (it is not on PyPI)")
    for mod in ("more_itertools", "git"):
        try:
            __import__(mod)
        except ImportError:
            pytest.skip(f"popxl-addons needs {mod}: pip install -e '.[addons]'")
    if path not in sys.path:
        sys.path.insert(0, path)
    import popxl_addons
    import popxl_addons.layers  # noqa: F401  (as scripts do: from popxl_addons.layers import Linear)
    return popxl_addons


@pytest.fixture(autouse=True)
def _small_target(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")
