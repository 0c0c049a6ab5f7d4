"""The engine's host memory: zeroed, writable, the same contents on huge pages or without them."""
import os
import runpy

import numpy as np
import pytest

import ipu
from ipu.hostmem import HUGE_PAGE, zeroed_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("rows,row_bytes", [(1, 8), (2, 3 * HUGE_PAGE // 2 + 8), (3, HUGE_PAGE)])
@pytest.mark.parametrize("huge", ["0", "1"])
def test_zeroed_memory_is_zeroed_writable_and_sized(monkeypatch, rows, row_bytes, huge):
    monkeypatch.setenv("IPU_SIM_HUGE_PAGES", huge)
    m = zeroed_memory(rows, row_bytes)
    assert m.shape == (rows, row_bytes) and m.dtype == np.uint8
    assert m.flags.c_contiguous and m.flags.writeable and m.flags.aligned
    assert not m.any()
    m[-1, -1] = 7
    m[0, 0] += 1
    assert m[-1, -1] == 7 and m[0, 0] == 1 and int(m.sum()) == 8


def test_mnist_step_is_the_same_on_huge_pages_or_not(monkeypatch):
    """A training step whose engine memory spans more than one huge page ends in the same bytes and
    cycles with IPU_SIM_HUGE_PAGES on and off."""
    import popxl

    mnist = runpy.run_path(os.path.join(ROOT, "examples", "mnist.py"), run_name="t")
    batch, hidden = 16, 64
    ir, h = mnist["train_ir"](batch, hidden, 0.05, mnist["init_weights"](hidden), "sgd", 1)
    exe = popxl.Session(ir, "ipu_model").executable
    assert exe.total_bytes > HUGE_PAGE
    x, y, _, _ = mnist["synthetic_mnist"](batch, 1)
    results = []
    for huge in ("0", "1"):
        monkeypatch.setenv("IPU_SIM_HUGE_PAGES", huge)
        e = ipu.Engine(exe)
        for name, s in exe.streams.items():
            if s.to_device:
                e.connect_stream(name, np.asarray(x if "image" in name else y, s.dtype.numpy).reshape(s.shape))
            elif s.callback is None:
                e.connect_stream(name, np.zeros(s.shape, s.dtype.numpy))
        e.run(0)
        e.run(0)
        results.append((e.memory.copy(), e.cycles))
    assert np.array_equal(results[0][0], results[1][0]) and results[0][1] == results[1][1]
