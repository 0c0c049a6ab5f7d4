"""The optimizer's update of a weight laid out by its consumer (nn.Linear's weight, read by the
matmul through a transpose) runs in place over the weight's storage, and the gradient dW^T is read
through the transpose: no copy of the gradient's transpose and no copy of the result back into the
weight (PopART's VarUpdateOps are in place; Poplar's dimShuffle is a view)."""
import copy

import numpy as np
import pytest
import torch

import poptorch


class _Linear(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n)

    def forward(self, x):
        y = self.fc(x)
        return y, poptorch.identity_loss((y * y).mean(), reduction="none")


@pytest.mark.parametrize("k, n, batch, momentum", [(24, 40, 3, 0.0), (37, 5, 1, 0.0), (16, 16, 4, 0.9)])
def test_linear_weight_is_updated_in_place_through_the_transposed_gradient(small_ipu, k, n, batch, momentum):
    model = _Linear(k, n)
    ref = copy.deepcopy(model)
    x = torch.randn(batch, k)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=momentum)
    for _ in range(2):
        pm(x)
        ref_opt.zero_grad()
        ref(x)[1].backward()
        ref_opt.step()
    pm.copyWeightsToHost()
    for (name, got), want in zip(model.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    steps = list(pm._session._lowered.op_names)
    assert not [s for s in steps if "transpose/copy" in s], steps
    assert not [s for s in steps if s.endswith("/update")], steps
