"""ONNX ops popxl has one op for are that op in PopART: an ONNX model and the PopXL program of the
same op give the same bits and the same cycles (no composition of other ops in between)."""
from __future__ import annotations

import numpy as np
import pytest

import popart
import popxl
import popxl.ops as ops

from popart_helpers import device, reference

ONNX_TO_POPXL = {"Sigmoid": ops.sigmoid, "Erf": ops.erf, "Reciprocal": ops.reciprocal}


def _onnx(op_type: str, x: np.ndarray):
    b = popart.Builder()
    t = b.addInputTensor(popart.TensorInfo("FLOAT", list(x.shape)), "x")
    y = getattr(b.aiOnnx, op_type.lower())([t])
    opts = popart.SessionOptions()
    opts.instrumentWithHardwareCycleCounter = True
    # PopXL's "ipu_model" is a GC200: the PopART device the same
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(tiles=1472), userOptions=opts)
    s.prepareDevice()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({t: x}, out))
    types = [op.type for op in s._program.ir.main_graph.ops]  # the op the model became
    return out[y], s.getCycleCount(), types, b.getModelProto(), y


def _popxl(op_type: str, x: np.ndarray):
    ir = popxl.Ir()
    with ir.main_graph:
        h2d = popxl.h2d_stream(x.shape, popxl.float32, "x")
        y = ONNX_TO_POPXL[op_type](ops.host_load(h2d, "x"))
        d2h = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(d2h, y)
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run({h2d: x})
        return out[d2h], s.total_cycles


@pytest.mark.parametrize("op_type", sorted(ONNX_TO_POPXL))
def test_an_onnx_op_and_its_popxl_op_give_the_same_bits_and_cycles(op_type, rng):
    x = rng.normal(0, 2, (5, 37)).astype(np.float32)
    x[0, :3] = (0.0, -0.0, 1e-3)
    got, cycles, types, proto, y = _onnx(op_type, x)
    want, want_cycles = _popxl(op_type, x)
    assert types == ["host_load", ONNX_TO_POPXL[op_type].__name__, "host_store"]  # one op, popxl's
    np.testing.assert_array_equal(got, want)
    assert cycles == want_cycles > 0, (types, cycles, want_cycles)
    (ref,) = reference(proto, {"x": x}, [y])
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)
