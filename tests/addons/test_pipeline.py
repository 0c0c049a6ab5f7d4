"""popxl-addons unchanged: a two-stage pipeline over 2 IPUs (addons.pipelined_execution: the
transform clones the ops into stage graphs, IPU copies and a repeat of the main cycle through
PopART's _ir views), checked against NumPy."""
import numpy as np

import popxl
from popxl import ops

B, D = 2, 4


def _layer(addons):
    class Layer(addons.Module):
        def build(self, x):
            w = self.add_variable_input("w", lambda: np.eye(D, dtype=np.float32) * 0.5 + 0.1, popxl.float32)
            b = self.add_variable_input("b", lambda: np.arange(D, dtype=np.float32), popxl.float32)
            return ops.gelu(x @ w + b)

    return Layer()


def _np_layer(x, w, b):
    import math
    z = x @ w + b
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))


def test_two_stage_pipeline_over_two_ipus(addons):
    steps = 6
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((B, D), popxl.float32, "x")
        y_s = popxl.d2h_stream((B, D), popxl.float32, "y")
        with popxl.ipu(0):
            f0, g0 = _layer(addons).create_graph(popxl.TensorSpec((B, D), popxl.float32))
            v0 = f0.init("l0")
        with popxl.ipu(1):
            f1, g1 = _layer(addons).create_graph(popxl.TensorSpec((B, D), popxl.float32))
            v1 = f1.init("l1")
        with addons.pipelined_execution(steps) as p:
            with p.stage(0), popxl.ipu(0):
                x = ops.host_load(x_s, "x")
                a, = g0.bind(v0).call(x)
                a = a.copy_to_ipu(1)
            with p.stage(1), popxl.ipu(1):
                y, = g1.bind(v1).call(a)
                ops.host_store(y_s, y)
    ir.num_host_transfers = steps
    graphs = {g.id for g in ir.graphs}
    assert {"stage_0_0", "stage_1_0", "ipu_copies_0", "pipeline_graph_0"} <= graphs, graphs
    main_types = [op.type for op in ir.main_graph.ops]
    assert main_types == ["call"], main_types  # everything moved into the pipeline graph
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(steps, B, D)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        assert sess.ipus_per_replica == 2
        ys = sess.run({x_s: xs})[y_s]
        w0, b0 = sess.get_tensor_data(v0.w), sess.get_tensor_data(v0.b)
        w1, b1 = sess.get_tensor_data(v1.w), sess.get_tensor_data(v1.b)
    want = np.stack([_np_layer(_np_layer(x, w0, b0), w1, b1) for x in xs])
    np.testing.assert_allclose(ys, want, rtol=1e-5, atol=1e-6)
