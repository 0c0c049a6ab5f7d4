"""Rules found running Graphcore's PopTorch tutorials and user-guide examples unchanged: buffers an
inference model writes, anchored gradients and updated parameters under PopTorch's names (with the
tracing frontend's "model." prefix too), and the names getTensorNames lists."""
import numpy as np
import pytest
import torch

import poptorch


class _Counter(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.register_buffer("count", torch.zeros(shape))
        self.plain = torch.zeros(shape)  # not a buffer: a constant of the program

    def forward(self, x):
        self.count += x
        self.plain += 1
        return self.count * 2 + self.plain


def test_inference_writes_its_buffers_on_the_device():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3) - 2.5
    model = _Counter((2, 3))
    m = poptorch.inferenceModel(model)
    outs = [m(x) for _ in range(3)]
    # the capture runs the forward once on the host: the plain attribute is 1 from then on
    for k, out in enumerate(outs, start=1):
        np.testing.assert_allclose(out.numpy(), (k * x * 2 + 1).numpy(), rtol=1e-6)
    m.copyWeightsToHost()
    np.testing.assert_allclose(model.count.numpy(), (3 * x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(model.plain.numpy(), np.ones((2, 3)))


def test_inference_with_device_iterations_accumulates_every_micro_batch():
    x = torch.tensor([[1.0, -2.0], [0.5, 4.0], [3.0, 3.0]])  # 3 micro-batches of shape (1, 2)
    model = _Counter((1, 2))
    m = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(3))
    out = m(x)
    run = torch.cumsum(x, 0)
    np.testing.assert_allclose(out.numpy(), (run * 2 + 1).numpy(), rtol=1e-6)
    m.copyWeightsToHost()
    np.testing.assert_allclose(model.count.numpy(), run[-1:].numpy(), rtol=1e-6)


def test_eval_batch_norm_keeps_its_running_statistics():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3))
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    m = poptorch.inferenceModel(model)
    x = torch.randn(2, 2, 5, 7)
    np.testing.assert_allclose(m(x).numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    m.copyWeightsToHost()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k])


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(5, 7)
        self.fc2 = torch.nn.Linear(7, 3)
        self.loss = torch.nn.MSELoss()

    def forward(self, x, y):
        out = self.fc2(torch.relu(self.fc1(x)))
        return out, self.loss(out, y)


@pytest.mark.parametrize("prefix", ["", "model."])
def test_anchor_gradient_and_updated_var(prefix):
    torch.manual_seed(1)
    x, y = torch.randn(4, 5), torch.randn(4, 3)
    ref = _Net()
    model = _Net()
    model.load_state_dict(ref.state_dict())
    opts = poptorch.Options()
    opts.anchorTensor("g", f"Gradient___{prefix}fc2.bias")
    opts.anchorTensor("w", f"UpdatedVar___{prefix}fc1.weight")
    m = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(2):
        ref_opt.zero_grad()
        ref(x, y)[1].backward()
        ref_opt.step()
        m(x, y)
        np.testing.assert_allclose(m.getAnchoredTensor("g").numpy(), ref.fc2.bias.grad.numpy(), rtol=1e-5, atol=1e-6)
        w = m.getAnchoredTensor("w")
        assert w.shape == (7, 5)
        np.testing.assert_allclose(w.numpy(), ref.fc1.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    names = m.getTensorNames()
    for n in ("fc1.weight", "Gradient___fc2.bias", "UpdatedVar___fc1.weight"):
        assert n in names


def test_anchor_unknown_names_are_errors():
    opts = poptorch.Options()
    opts.anchorTensor("w", "UpdatedVar___model.nope")
    model = _Net()
    m = poptorch.trainingModel(model, opts)
    with pytest.raises(poptorch.Error, match="UpdatedVar___fc1.weight"):
        m(torch.randn(2, 5), torch.randn(2, 3))


def test_parameters_and_buffers_print_as_torch_does():
    model = _Net()
    model.register_buffer("steps", torch.zeros(2))
    m = poptorch.trainingModel(model)
    m(torch.randn(2, 5), torch.randn(2, 3))
    text = repr(model.fc2.bias)
    assert text.startswith("Parameter containing:\ntensor([") and text.endswith("requires_grad=True)")
    np.testing.assert_allclose(torch.Tensor(model.fc2.bias.detach()).numpy(), m.fc2.bias.detach().numpy())
    assert repr(model.steps) == "tensor([0., 0.])"


def test_offline_compiled_export_runs_when_loaded(tmp_path):
    torch.manual_seed(2)
    x, y = torch.randn(3, 5), torch.randn(3, 3)
    opts = poptorch.Options().useOfflineIpuTarget(poptorch.ipuHardwareVersion())
    m = poptorch.trainingModel(_Net(), opts)
    with pytest.raises(poptorch.Error, match="offline"):
        m(x, y)
    path = str(tmp_path / "net.poptorch")
    m.compileAndExport(path, x, y)
    m.destroy()
    loaded = poptorch.load(path)
    assert loaded.options.connection_type == poptorch.ConnectionType.Always.value
    assert not loaded.options.exists("ipu_version")
    out, loss = loaded(x, y)
    assert out.shape == (3, 3) and np.isfinite(float(loss))


def test_inference_model_of_a_training_model_shares_its_weights():
    torch.manual_seed(3)
    x, y = torch.randn(4, 5), torch.randn(4, 3)
    model = _Net()
    train = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.2))
    infer = poptorch.inferenceModel(train)
    assert infer.model is model
    for _ in range(2):
        train(x, y)
    out, _ = infer(x, y)
    train.copyWeightsToHost()
    with torch.no_grad():
        ref = model.fc2(torch.relu(model.fc1(x)))
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


class _TwoLanes(torch.nn.Module):
    """Two lanes of matmuls, each phase running one lane on each of two IPUs (the lanes swap)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(6, 6) * 0.4) for _ in range(4)])

    def forward(self, x, target):
        with poptorch.Block("p0_a"):
            a, b = torch.split(x, 6)
        for phase in range(2):
            with poptorch.Block(f"p{phase}_a"):
                a2 = torch.relu(self.w[2 * phase] @ a)
            with poptorch.Block(f"p{phase}_b"):
                b2 = torch.relu(self.w[2 * phase + 1] @ b)
            a, b = b2, a2
        with poptorch.Block("p1_b"):
            res = a + b
            return res, torch.nn.functional.l1_loss(res, target)


def test_parallel_phased_execution_with_two_ipus_a_phase(small_ipu):
    torch.manual_seed(4)
    x, target = torch.rand(12, 3), torch.rand(6, 3)
    ref = _TwoLanes()
    model = _TwoLanes()
    model.load_state_dict(ref.state_dict())
    opts = poptorch.Options()
    opts.setExecutionStrategy(poptorch.ParallelPhasedExecution(
        [poptorch.Stage("p0_a").ipu(0), poptorch.Stage("p0_b").ipu(2)],
        [poptorch.Stage("p1_a").ipu(1), poptorch.Stage("p1_b").ipu(3)]))
    m = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.5))
    out, loss = m(x, target)
    assert {n.ipu for n in m._captured.nodes} == {0, 1, 2, 3}
    ref_out, ref_loss = ref(x, target)
    ref_loss.backward()
    np.testing.assert_allclose(out.detach().numpy(), ref_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(loss), float(ref_loss.detach()), rtol=1e-5)
    with torch.no_grad():
        for p in ref.parameters():
            p -= 0.5 * p.grad
    m.copyWeightsToHost()
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)


class _GoneWorkerQueue:
    """A queue whose next batch can no longer be read: its worker, which shared the tensors
    through file descriptors, has exited (multiprocessing raises EOFError or ConnectionError)."""

    def __init__(self, error):
        self.error, self.closed = error, False

    def get_nowait(self):
        raise self.error

    def close(self):
        self.closed = True


class _ExitedProcess:
    def join(self, timeout=None):
        pass

    def is_alive(self):
        return False


@pytest.mark.parametrize("error", [EOFError(), ConnectionRefusedError()])
def test_async_accessor_terminates_after_its_worker_is_gone(error):
    acc = poptorch.AsynchronousDataAccessor(torch.utils.data.TensorDataset(torch.zeros(4, 2)))
    q = _GoneWorkerQueue(error)
    acc._queue, acc._process, acc._stop = q, _ExitedProcess(), __import__("threading").Event()
    acc.terminate()
    assert q.closed and acc._process is None and acc._queue is None
