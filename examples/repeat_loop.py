"""A value updated ten times in a repeat loop (x -> 2x + 1): repeat lowers to a loop, not an unrolled copy."""
import numpy as np
import popxl
import popxl.ops as ops

ir = popxl.Ir()


class Step(popxl.Module):
    def build(self, x: popxl.Tensor) -> popxl.Tensor:
        return x * 2.0 + 1.0


with ir.main_graph:
    x_stream = popxl.h2d_stream((8,), popxl.float32, name="x")
    x = ops.host_load(x_stream)
    step_graph = ir.create_graph(Step(), x)
    (y,) = ops.repeat(step_graph, 10, x)
    out = popxl.d2h_stream(y.shape, y.dtype, name="y")
    ops.host_store(out, y)

session = popxl.Session(ir, "ipu_model")
data = np.linspace(-1, 1, 8, dtype=np.float32)
with session:
    result = session.run({x_stream: data})
expected = data.copy()
for _ in range(10):
    expected = expected * 2 + 1
print("after 10 steps:", result[out])
assert np.allclose(result[out], expected)
