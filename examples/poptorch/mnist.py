"""Train a CNN on MNIST with PopTorch on the simulated IPU, as Graphcore's PopTorch MNIST demo does.

    python examples/poptorch/mnist.py [--epochs 1] [--batch-size 8] [--device-iterations 20]
                                      [--lr 0.05] [--data-dir DIR] [--train-size N] [--test-size N]

A torch.nn.Module (two conv blocks, two linear layers, dropout, softmax) with its loss in
forward(), wrapped by poptorch.trainingModel with poptorch.Options().deviceIterations(...), fed
by poptorch.DataLoader; then poptorch.inferenceModel evaluates it. The first training call is
checked against the same step in PyTorch on the CPU. With MNIST's idx files in --data-dir it
trains on them; otherwise on examples/mnist.py's synthetic MNIST-like set (no network needed).
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import time

import numpy as np
import torch
import torch.nn as nn

import poptorch

HERE = os.path.dirname(os.path.abspath(__file__))


def _popxl_mnist():
    """examples/mnist.py (its idx reader and synthetic data set)."""
    spec = importlib.util.spec_from_file_location("popxl_mnist_example", os.path.join(HERE, "..", "mnist.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Block(nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = Block(1, 16, 3, 2)
        self.layer2 = Block(16, 32, 3, 2)
        self.layer3 = nn.Linear(800, 128)
        self.layer3_act = nn.ReLU()
        self.layer3_dropout = nn.Dropout(0.5)
        self.layer4 = nn.Linear(128, 10)
        self.softmax = nn.Softmax(1)

    def forward(self, x):
        x = self.layer2(self.layer1(x))
        x = x.view(-1, 800)
        x = self.layer3_act(self.layer3(x))
        x = self.layer4(self.layer3_dropout(x))
        return self.softmax(x)


class TrainingModelWithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        output = self.model(x)
        if labels is None:
            return output
        return output, self.loss(output, labels)


def accuracy(predictions, labels):
    return float((predictions.argmax(1) == labels).float().mean()) * 100


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device-iterations", type=int, default=20)
    p.add_argument("--test-batch-size", type=int, default=80)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--train-size", type=int, default=3200)
    p.add_argument("--test-size", type=int, default=800)
    a = p.parse_args(argv)

    pm = _popxl_mnist()
    data = pm.load_mnist(a.data_dir) or pm.synthetic_mnist(a.train_size, a.test_size)
    x_tr, y_tr, x_te, y_te = data
    mean, std = 0.1307, 0.3081
    train_set = torch.utils.data.TensorDataset(torch.from_numpy((x_tr[:a.train_size, None] - mean) / std),
                                               torch.from_numpy(y_tr[:a.train_size].astype(np.int64)))
    test_set = torch.utils.data.TensorDataset(torch.from_numpy((x_te[:a.test_size, None] - mean) / std),
                                              torch.from_numpy(y_te[:a.test_size].astype(np.int64)))

    torch.manual_seed(0)
    model = Network()
    model_with_loss = TrainingModelWithLoss(model)
    reference = copy.deepcopy(model_with_loss)

    opts = poptorch.Options().deviceIterations(a.device_iterations).outputMode(poptorch.OutputMode.All)
    opts.randomSeed(0)
    train_loader = poptorch.DataLoader(opts, train_set, batch_size=a.batch_size, shuffle=True, drop_last=True)
    training_model = poptorch.trainingModel(model_with_loss, opts,
                                            optimizer=torch.optim.SGD(model.parameters(), lr=a.lr))

    # the first step, checked against PyTorch on the CPU (with dropout off on both sides)
    x0, y0 = next(iter(train_loader))
    reference.model.layer3_dropout.p = 0.0
    check = poptorch.trainingModel(copy.deepcopy(reference), poptorch.Options().deviceIterations(
        a.device_iterations).outputMode(poptorch.OutputMode.All))
    t0 = time.perf_counter()
    _, ipu_losses = check(x0, y0)
    compile_s = time.perf_counter() - t0
    cpu_losses = reference(x0[:a.batch_size], y0[:a.batch_size])[1].detach().reshape(1)
    check.destroy()
    # (the IPU updates the weights between micro-batches: only the first loss is before any update)
    err = abs(float(ipu_losses[0]) - float(cpu_losses[0]))
    print(f"first step: loss on the IPU {float(ipu_losses[0]):.6f}, in PyTorch {float(cpu_losses[0]):.6f} "
          f"(|diff| {err:.2e}); capture + compile {compile_s:.2f} s")
    assert err < 1e-5

    losses, t_steps, steps = [], 0.0, 0
    for epoch in range(1, a.epochs + 1):
        for xb, yb in train_loader:
            t0 = time.perf_counter()
            preds, batch_losses = training_model(xb, yb)
            if steps:
                t_steps += time.perf_counter() - t0
            steps += 1
            losses.append(float(batch_losses.mean()))
        print(f"epoch {epoch}: mean loss {np.mean(losses[-len(train_loader):]):.4f}, last batch accuracy "
              f"{accuracy(preds, yb):.1f}%")
    cycles = training_model._session.total_cycles / max(steps, 1)
    training_model.detachFromDevice()

    inference_model = poptorch.inferenceModel(model)
    test_loader = poptorch.DataLoader(poptorch.Options(), test_set, batch_size=a.test_batch_size, drop_last=True)
    accs = [accuracy(inference_model(xb), yb) for xb, yb in test_loader]
    acc = float(np.mean(accs))
    print(f"accuracy on the test set: {acc:.2f}%")
    if steps > 1:
        print(f"training: {t_steps / (steps - 1) * 1e3:.0f} ms per call of {a.device_iterations} micro-batches "
              f"(wall), {cycles:,.0f} simulated cycles per call")
    inference_model.destroy()
    return {"losses": losses, "accuracy": acc, "first_loss_error": err}


if __name__ == "__main__":
    main()
