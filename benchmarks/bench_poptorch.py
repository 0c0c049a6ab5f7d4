"""PopTorch on the simulated GC200: capture + compile time, and the wall time of a training step next
to the same step in PyTorch on the CPU, for an MLP and a transformer encoder.

    python benchmarks/bench_poptorch.py [--steps 5] [--batch 32] [--only mlp|encoder]

Each model (tests/poptorch/models.py's: an MLP 784-256-256-10 and a 2-layer encoder, hidden 128,
4 heads, sequence 64) is wrapped by poptorch.trainingModel with SGD. "first call" is the first
call's wall time, split into the capture and its translation into the popxl IR (which for the
first model of a process includes PyTorch's one-time import of TorchDynamo, made by the dispatch
mode) and the simulated compile (lowering + ipu.compile). The step time is the median of --steps
calls after the first; PyTorch's is the median of the same forward, backward and SGD step on the
CPU (torch's own threads). Both run in this process, one after the other.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import _timing  # noqa: E402  (before NumPy)

_timing.one_blas_thread()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import poptorch  # noqa: E402


class MLP(nn.Module):
    def __init__(self, d_in=784, hidden=256, classes=10):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(d_in, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, classes)

    def forward(self, x, labels):
        logits = self.out(F.relu(self.fc2(F.relu(self.fc1(x)))))
        return logits, F.cross_entropy(logits, labels)


class Encoder(nn.Module):
    def __init__(self, vocab=1000, d=128, heads=4, layers=2, seq=64, classes=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens, labels):
        logits = self.head(self.encoder(self.tok(tokens) + self.pos).mean(1))
        return logits, F.cross_entropy(logits, labels)


def _data(kind, batch):
    g = torch.Generator().manual_seed(0)
    if kind == "mlp":
        return torch.randn(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g)
    return torch.randint(0, 1000, (batch, 64), generator=g), torch.randint(0, 4, (batch,), generator=g)


def bench(kind, batch, steps):
    torch.manual_seed(0)
    model = (MLP if kind == "mlp" else Encoder)()
    ref = (MLP if kind == "mlp" else Encoder)()
    ref.load_state_dict(model.state_dict())
    x, y = _data(kind, batch)
    trainer = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01))
    t0 = time.perf_counter()
    trainer(x, y)
    first = time.perf_counter() - t0
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer(x, y)
        times.append(time.perf_counter() - t0)
    cycles = trainer._session.total_cycles / (steps + 1)
    trainer.destroy()
    opt = torch.optim.SGD(ref.parameters(), lr=0.01)

    def torch_step():
        opt.zero_grad()
        ref(x, y)[1].backward()
        opt.step()

    torch_step()
    ttimes = []
    for _ in range(steps):
        t0 = time.perf_counter()
        torch_step()
        ttimes.append(time.perf_counter() - t0)
    return {"first": first, "capture": trainer.capture_seconds, "compile": trainer.compile_seconds,
            "step": statistics.median(times), "torch": statistics.median(ttimes), "cycles": cycles,
            "step_spread": _timing.Spread(times), "torch_spread": _timing.Spread(ttimes)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--only", choices=("mlp", "encoder"))
    a = p.parse_args(argv)
    os.environ.pop("IPU_SIM_TARGET", None)
    table = Table(title=f"PopTorch training step on the simulated GC200 (batch {a.batch})")
    for col in ("model", "first call s", "capture + IR s", "compile s", "step", "PyTorch CPU", "ratio",
                "cycles / step"):
        table.add_column(col, justify="right" if col != "model" else "left")
    results = {}
    for kind in ("mlp", "encoder"):
        if a.only and kind != a.only:
            continue
        r = bench(kind, a.batch, a.steps)
        results[kind] = r
        table.add_row(kind, f"{r['first']:.2f}", f"{r['capture']:.2f}", f"{r['compile']:.2f}",
                      r["step_spread"].ms(1), r["torch_spread"].ms(2), r["step_spread"].ratio(r["torch_spread"]),
                      f"{r['cycles']:,.0f}")
    Console(width=200).print(table)
    print(f"load average {_timing.load_average()} (steps: best, median (p10-p90))")
    return results


if __name__ == "__main__":
    main()
