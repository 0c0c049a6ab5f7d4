"""Gradient ops take the name scope of the forward op they differentiate."""
import numpy as np

import popxl
import popxl.ops as ops
import popxl.transforms as transforms


def test_gradient_ops_carry_the_forward_scope():
    ir = popxl.Ir()

    def fwd(x, w):
        with popxl.name_scope("layer0"):
            h = ops.gelu(x @ w)
        with popxl.name_scope("layer1"), popxl.name_scope("ffn"):
            y = ops.softmax(h * 2.0, axis=1)
        return y

    with ir.main_graph:
        x = popxl.variable(np.ones((4, 8), np.float32), name="x")
        w = popxl.variable(np.ones((8, 8), np.float32), name="w")
        with popxl.name_scope("outer"):  # where autodiff is called does not matter
            graph = ir.create_graph(fwd, x, w)
            grad = transforms.autodiff(graph)
    fwd_scopes = {op.type: op.scope for op in graph.ops}
    assert fwd_scopes["matmul"] == "outer/layer0"
    scopes = {op.scope for op in grad.graph.ops}
    assert scopes <= {"outer/layer0", "outer/layer1/ffn"}, scopes
    # the matmul gradients belong to layer0, the softmax gradient to layer1/ffn
    for op in grad.graph.ops:
        if op.type == "matmul":
            assert op.scope == "outer/layer0" and op.name.startswith("outer/layer0/")
    assert any(op.scope == "outer/layer1/ffn" for op in grad.graph.ops)
