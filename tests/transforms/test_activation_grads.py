"""An activation's gradient is one op, as PopART's *GradOpx grow one popnn nonLinearityInputGradient:
no sigmoid, products or sums beside it, each of which would be a temporary the size of the activation
(EfficientNet's SiLU gradients were six of them)."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
import popxl.transforms as transforms


@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float16])
@pytest.mark.parametrize("act, reads", [(ops.swish, "input"), (ops.gelu, "input"), (ops.sigmoid, "output"), (ops.relu, "output")])
def test_activation_gradient_is_one_nonlinearity_grad_op(act, reads, dtype):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 3, 5), dtype.as_numpy()), name="x")
        graph = ir.create_graph(lambda t: act(t), x)
        grad = transforms.autodiff(graph)
    (op,) = grad.graph.ops
    assert op.type == "nonlinearity_grad"
    (fwd,) = graph.ops
    # what the gradient reads of the forward pass: the activation's input for swish, its output otherwise
    read = {c.fwd_tensor for c in grad.expected_inputs if c.connection_type.name == "Fwd"}
    assert read == {fwd.inputs[0] if reads == "input" else fwd.outputs[0]}
