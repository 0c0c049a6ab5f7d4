"""The codelet registry: one codelet per name; ipu/ alone has none (the layer above registers them)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ipu
from ipu import IN, OUT, Codelet, Field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_second_codelet_of_a_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        @ipu.register
        class ScaledAdd(Codelet):  # the built-in ScaledAdd is registered (tests/conftest.py)
            name = "ScaledAdd"
    assert type(ipu.get_codelet("ScaledAdd")).__module__ == "codelets.scaled_add"


def test_the_same_class_registered_again_replaces_itself():
    def define():
        @ipu.register
        class TwiceDefined(Codelet):
            name = "TwiceDefinedForTest"
            fields = (Field("in", IN), Field("out", OUT))

            def cycles(self, types, cnt, fp, ip, target):
                return np.zeros(cnt.shape[0], np.int64)
        return TwiceDefined

    first, second = define(), define()
    assert first is not second
    assert type(ipu.get_codelet("TwiceDefinedForTest")) is second


def test_ipu_alone_has_no_codelets_and_says_how_to_get_them():
    code = ("import ipu\n"
            "try:\n    ipu.get_codelet('ScaledAdd')\nexcept KeyError as e:\n    print(e)\n"
            "import sys; print('codelets' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "No codelet named 'ScaledAdd'" in out and "import codelets" in out
    assert out.strip().endswith("False")  # ipu never imported the package above it


def test_the_family_list_of_codelets_names_every_builtin_codelet():
    # codelets/__init__.py's docstring is the map of the package: it drifted once (roi_align missing)
    import codelets

    doc = codelets.__doc__
    builtin = {name: type(c).__module__.split(".")[-1] for name, c in ipu.registered_codelets().items()
               if type(c).__module__.startswith("codelets.")}
    missing = sorted(f"{mod}: {name}" for name, mod in builtin.items()
                     if f"- {mod}:" not in doc or name not in doc)
    assert not missing, f"codelets/__init__.py's family list lacks {missing}"
