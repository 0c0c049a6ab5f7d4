"""The PoplarExecutor's life: weights kept in sync with the wrapped model, setOptimizer,
detach / attach, destroy, compileAndExport / poptorch.load, and PopTorch's errors."""
import copy

import pytest
import torch

import poptorch

import models


def test_parameters_follow_the_device(small_ipu):
    torch.manual_seed(0)
    model = models.MLP()
    before = copy.deepcopy(model.state_dict())
    trainer = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.5))
    x, y = models.data("mlp", 4)
    trainer(x, y)
    # reading a parameter (attribute, state_dict, named_parameters) copies the device's weights
    assert not torch.equal(model.fc1.weight, before["fc1.weight"])
    assert not torch.equal(model.state_dict()["out.bias"], before["out.bias"])
    # an inference model of the same model sees the trained weights
    inference = poptorch.inferenceModel(model)
    out = inference(x, y)[0]
    torch.testing.assert_close(out, model(x, y)[0].detach(), rtol=1e-5, atol=1e-6)
    trainer(x, y)
    out2 = inference(x, y)[0]
    assert not torch.equal(out, out2)
    torch.testing.assert_close(out2, model(x, y)[0].detach(), rtol=1e-5, atol=1e-6)
    # the user changes the weights: copyWeightsToDevice sends them
    with torch.no_grad():
        model.out.bias.fill_(3.0)
    trainer.copyWeightsToDevice()
    trainer.copyWeightsToHost()
    assert torch.all(model.out.bias == 3.0)
    trainer.destroy()
    assert type(model) is models.MLP and type(model.fc1.weight) is torch.nn.Parameter


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_set_optimizer_changes_the_learning_rate(small_ipu):
    torch.manual_seed(0)
    model = models.MLP()
    ref = copy.deepcopy(model)
    opt = poptorch.optim.SGD(model.parameters(), lr=0.1)
    trainer = poptorch.trainingModel(model, optimizer=opt)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, 1, gamma=0.5)
    x, y = models.data("mlp", 4)
    for _ in range(3):
        trainer(x, y)
        sched.step()
        trainer.setOptimizer(opt)
        ref_opt.zero_grad()
        ref(x, y)[1].backward()
        ref_opt.step()
        ref_sched.step()
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v, rtol=1e-5, atol=1e-6)
    # a constant attribute cannot change without recompiling
    with pytest.raises(poptorch.Error, match="constant attribute"):
        trainer.setOptimizer(poptorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        trainer(x, y)


def test_detach_attach_destroy(small_ipu):
    model = models.MLP()
    trainer = poptorch.trainingModel(model)
    x, y = models.data("mlp", 4)
    trainer(x, y)
    assert trainer.isAttachedToDevice()
    trainer.detachFromDevice()
    assert not trainer.isAttachedToDevice()
    w = model.fc1.weight.detach().clone()
    with pytest.raises(poptorch.Error, match="Device is not attached"):
        trainer.detachFromDevice()
    trainer(x, y)  # attaches again, with the host weights
    assert trainer.isAttachedToDevice() and not torch.equal(model.fc1.weight, w)
    trainer.destroy()
    assert not trainer.isCompiled()
    with pytest.raises(poptorch.Error, match="Model has not been compiled or has been destroyed"):
        trainer.copyWeightsToHost()


def test_compile_and_export_then_load(small_ipu, tmp_path):
    torch.manual_seed(0)
    model = models.MLP().eval()
    x, y = models.data("mlp", 4)
    path = str(tmp_path / "mlp.poptorch")
    poptorch.inferenceModel(model).compileAndExport(path, x, y)
    loaded = poptorch.load(path)
    torch.testing.assert_close(loaded(x, y)[0], model(x, y)[0].detach(), rtol=1e-5, atol=1e-6)
    again = poptorch.inferenceModel(model)
    again.loadExecutable(path)
    assert again.isCompiled()
    with pytest.raises(poptorch.Error, match="Invalid file"):
        poptorch.load(__file__)


@pytest.mark.parametrize("how", ["option", "environment"])
def test_executable_caching(small_ipu, tmp_path, monkeypatch, how):
    """enableExecutableCaching(path) or POPTORCH_CACHE_DIR: the second model of the same program
    loads its executable from the cache and trains the same; enableExecutableCaching(None) opts out."""
    def run(cache_opt):
        torch.manual_seed(0)
        model = models.MLP()
        opts = poptorch.Options()
        if cache_opt != "unset":
            opts.enableExecutableCaching(cache_opt)
        trainer = poptorch.trainingModel(model, opts)
        x, y = models.data("mlp", 4)
        loss = float(trainer(x, y)[1])
        return trainer._session.loaded_from_cache, loss

    cache = tmp_path / "cache"
    if how == "environment":
        monkeypatch.setenv("POPTORCH_CACHE_DIR", str(cache))
        first, second, off = run("unset"), run("unset"), run(None)
    else:
        first, second, off = run(str(cache)), run(str(cache)), run(None)
    assert (first[0], second[0], off[0]) == (False, True, False)
    assert first[1] == second[1] == off[1]
    assert len(list(cache.glob("*.popef"))) == 1


def test_loss_rules(small_ipu):
    class NoLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(2, 2)

        def forward(self, x):
            return (self.l(x) ** 2).mean()

    with pytest.raises(poptorch.Error, match="Couldn't find a loss in graph"):
        poptorch.trainingModel(NoLoss())(torch.zeros(2, 2))

    class TwoLosses(NoLoss):
        def forward(self, x):
            out = self.l(x)
            return torch.nn.functional.mse_loss(out, x) + torch.nn.functional.l1_loss(out, x)

    with pytest.raises(poptorch.Error, match="Multiple independent losses found"):
        poptorch.trainingModel(TwoLosses())(torch.zeros(2, 2))

    class Wrapped(NoLoss):
        def forward(self, x):
            out = self.l(x)
            return poptorch.identity_loss(torch.nn.functional.mse_loss(out, x) + (out ** 2).sum(), reduction="none")

    poptorch.trainingModel(Wrapped())(torch.ones(2, 2))


def test_unsupported_op_names_op_and_module(small_ipu):
    class Inner(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.inv(x)

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Inner()

        def forward(self, x):
            return self.block(x) + 1

    with pytest.raises(poptorch.Error, match=r"Unsupported op aten::linalg_inv_ex.* in module 'block' \(Inner\).*"
                                             r"CPU before or after"):
        poptorch.inferenceModel(Outer())(torch.eye(3).repeat(2, 1, 1))


def test_item_on_device_values_is_an_error(small_ipu):
    class M(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(poptorch.Error, match="reads the value of a tensor computed on the IPU"):
        poptorch.inferenceModel(M())(torch.ones(2))


def test_backward_on_outputs_is_an_error(small_ipu):
    out = poptorch.inferenceModel(torch.nn.Linear(2, 2))(torch.ones(1, 2))
    with pytest.raises(poptorch.Error, match="backward\\(\\) cannot be called explicitly"):
        out.backward()


class _CachedContext(torch.nn.Module):
    """A decoder step that reads an encoder output kept on the device in a buffer, as Hugging Face's
    IPU generation code keeps one with updatableNamedBuffers."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.register_buffer("context", torch.zeros(3, 6))
        self.register_buffer("scale", torch.ones(6))

    def forward(self, x):
        return self.proj(x) @ self.context.T * self.scale.sum()


def test_updatable_named_buffers_are_copied_alone(small_ipu):
    torch.manual_seed(0)
    model = _CachedContext()
    opts = poptorch.Options().updatableNamedBuffers(["context"])
    decoder = poptorch.inferenceModel(model, opts)
    x = torch.randn(2, 6)
    torch.testing.assert_close(decoder(x), torch.zeros(2, 3))
    # the user writes the new encoder output into the buffer through the executor, then sends it
    decoder.context.copy_(torch.randn(3, 6))
    decoder.scale.fill_(2.0)  # not updatable: copyNamedBuffersToDevice leaves it as it was
    decoder.copyNamedBuffersToDevice()
    with torch.no_grad():
        want = model.proj(x) @ model.context.T * 6.0
    torch.testing.assert_close(decoder(x), want, rtol=1e-5, atol=1e-6)


def test_updatable_named_buffers_errors(small_ipu):
    x = torch.randn(2, 6)
    with pytest.raises(ValueError, match="list of buffer names"):
        poptorch.Options().updatableNamedBuffers("context")
    unknown = poptorch.inferenceModel(_CachedContext(), poptorch.Options().updatableNamedBuffers(["proj.weight"]))
    with pytest.raises(poptorch.Error, match=r"not buffers of the model \(its buffers: context, scale\)"):
        unknown(x)
    plain = poptorch.inferenceModel(_CachedContext())
    with pytest.raises(poptorch.Error, match="has not been compiled"):
        plain.copyNamedBuffersToDevice()
    plain(x)
    plain.copyNamedBuffersToDevice()  # nothing is updatable: a warning, and the device keeps its values
    torch.testing.assert_close(plain(x), torch.zeros(2, 3))


def test_compile_hooks(small_ipu):
    calls = []
    pre = poptorch.registerPreCompileHook(lambda: calls.append("pre"))
    post = poptorch.registerPostCompileHook(lambda: calls.append(("post", model.isCompiled())))
    try:
        model = poptorch.inferenceModel(torch.nn.Linear(2, 2))
        model(torch.zeros(1, 2))
        model(torch.zeros(1, 2))  # compiled once: the hooks run once
        assert calls == ["pre", ("post", True)]
    finally:
        pre.remove()
        post.remove()
    poptorch.inferenceModel(torch.nn.Linear(2, 2))(torch.zeros(1, 2))
    assert len(calls) == 2
    with pytest.raises(RuntimeError, match="Pre-compile hook must be callable"):
        poptorch.registerPreCompileHook(3)
