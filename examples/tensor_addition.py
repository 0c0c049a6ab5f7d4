"""Add a variable, a constant and streamed data, and read the variable back."""
import numpy as np
import popxl
import popxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    a = popxl.variable(np.arange(12, dtype=np.float32).reshape(3, 4), name="a")
    b = popxl.constant(np.full((3, 4), 0.5, np.float32), name="b")
    x_stream = popxl.h2d_stream((3, 4), popxl.float32, name="x")
    x = ops.host_load(x_stream)
    s = a + b + x
    ops.add_(a, x)  # a += x, in place on the variable
    out_stream = popxl.d2h_stream(s.shape, s.dtype, name="sum")
    ops.host_store(out_stream, s)

data = np.ones((3, 4), np.float32)
session = popxl.Session(ir, "ipu_model")
with session:
    out = session.run({x_stream: data})
print("a + b + x =\n", out[out_stream])
print("a after a += x =\n", session.get_tensor_data(a))
expected = np.arange(12, dtype=np.float32).reshape(3, 4) + 0.5 + 1
assert np.allclose(out[out_stream], expected)
assert np.allclose(session.get_tensor_data(a), np.arange(12).reshape(3, 4) + 1)
