"""Every op table entry with an ONNX name (popxl.op_table, `onnx`) is what PopART makes of a node of
that ONNX op: one op of the entry, nothing composed around it."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh

import popart
from popxl.op_table import OP_TYPES, BinaryOpType

from popart_helpers import device

F, B = onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL
NAMED = sorted(n for n, e in OP_TYPES.items() if e.onnx)
BOOL_IN = {"logical_not", "logical_and", "logical_or"}


def _inputs(name: str):
    """(element type, shape) of the node's inputs."""
    e = OP_TYPES[name]
    t = B if name in BOOL_IN else F
    if name == "matmul":
        return [(F, [2, 3]), (F, [3, 4])]
    if name == "where":
        return [(B, [2, 3]), (F, [2, 3]), (F, [2, 3])]
    if isinstance(e, BinaryOpType) or name in ("maximum", "minimum"):
        return [(t, [2, 3]), (t, [2, 3])]
    return [(t, [2, 3])]


def _ops_of(name: str):
    domain, _, op = OP_TYPES[name].onnx.rpartition("::")
    ins = [oh.make_tensor_value_info(f"x{i}", t, s) for i, (t, s) in enumerate(_inputs(name))]
    node = oh.make_node(op, [i.name for i in ins], ["y"], domain=domain)
    e = OP_TYPES[name]
    bool_out = getattr(e, "output", "") == "bool" or getattr(e, "kind", "arith") != "arith"
    out = oh.make_tensor_value_info("y", B if bool_out else F, [2, 4] if name == "matmul" else [2, 3])
    g = oh.make_graph([node], "g", ins, [out])
    opsets = [oh.make_opsetid("", 13)] + ([oh.make_opsetid(domain, 1)] if domain else [])
    s = popart.InferenceSession(oh.make_model(g, opset_imports=opsets).SerializeToString(),
                                popart.DataFlow(1, ["y"]), device())
    return [op.type for op in s._program.ir.main_graph.ops if op.type not in ("host_load", "host_store")]


def test_the_entries_with_onnx_names_are_the_elementwise_and_matmul_ops():
    assert {"sigmoid", "erf", "reciprocal", "add", "matmul"} <= set(NAMED)
    assert len({OP_TYPES[n].onnx for n in NAMED}) == len(NAMED)  # one entry per ONNX op


@pytest.mark.parametrize("name", NAMED)
def test_an_onnx_op_translates_to_its_entry(name):
    assert _ops_of(name) == [name]
