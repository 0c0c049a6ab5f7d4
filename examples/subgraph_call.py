"""A graph created once and called twice: its code is lowered once and shared."""
import numpy as np
import popxl
import popxl.ops as ops

ir = popxl.Ir()


def add_weight(x: popxl.Tensor, w: popxl.Tensor) -> popxl.Tensor:
    return x + w


with ir.main_graph:
    x_stream = popxl.h2d_stream((4,), popxl.float32, name="x")
    x = ops.host_load(x_stream)
    w = popxl.variable(np.full(4, 10, np.float32), name="w")
    add_graph = ir.create_graph(add_weight, x, w)
    (y,) = ops.call(add_graph, x, w)
    (z,) = ops.call(add_graph, y, w)
    out = popxl.d2h_stream(z.shape, z.dtype, name="z")
    ops.host_store(out, z)

session = popxl.Session(ir, "ipu_model")
with session:
    result = session.run({x_stream: np.arange(4, dtype=np.float32)})
print("x + 2w =", result[out])
assert np.allclose(result[out], np.arange(4) + 20)
