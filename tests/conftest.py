import os
import sys

# Tests run from a checkout without installing too.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# No kernel-compile progress lines on standard error (ipu/compile_progress.py): tests that read
# stderr must see the same text on a cold kernel cache (CI) as on a warm one; subprocesses inherit it.
os.environ.setdefault("IPU_SIM_PROGRESS", "0")

# The built-in codelets register when the layer above ipu/ imports them (popxl does); tests that
# write tile-level programs directly against ipu/ use them by name.
import codelets  # noqa: E402,F401

# Shared test helpers (run_popxl) import as plain modules from any test directory.
HELPERS = os.path.join(ROOT, "tests", "lowering")
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)
