"""Helpers for the PopART frontend tests: run an ONNX model with popart.InferenceSession on a
small simulated IPU model and compare with onnx.reference (the ONNX reference implementation)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

import popart

TILES = 4


def device(num_ipus: int = 1, tiles: int = TILES):
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": num_ipus, "tilesPerIPU": tiles})


def run_inference(proto, inputs: dict, anchors, bps: int = 1, options=None, art="All", tiles=TILES):
    """Run `proto` once; returns {anchor: array}."""
    if isinstance(anchors, str):
        anchors = [anchors]
    df = popart.DataFlow(bps, {a: popart.AnchorReturnType(art) for a in anchors})
    s = popart.InferenceSession(proto, df, device(tiles=tiles), userOptions=options)
    s.prepareDevice()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO(inputs, out))
    return out


def reference(proto, inputs: dict, outputs):
    """onnx.reference's values of `outputs` (the model's graph outputs are set to them)."""
    m = onnx.load_from_string(proto) if isinstance(proto, bytes) else onnx.load(proto) if isinstance(proto, str) \
        else proto
    del m.graph.output[:]
    for o in outputs:
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(o))
    return ReferenceEvaluator(m).run(None, inputs)


def check_against_reference(proto, inputs, outputs, rtol=1e-5, atol=1e-5):
    got = run_inference(proto, inputs, outputs)
    want = reference(proto, inputs, outputs)
    for o, w in zip(outputs, want):
        np.testing.assert_allclose(got[o], np.asarray(w).astype(got[o].dtype), rtol=rtol, atol=atol, err_msg=o)
    return got

