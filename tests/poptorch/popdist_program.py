"""Trained under poprun by test_popdist.py: each instance runs popdist.poptorch.Options (its local
replicas), reads its share of the data with poptorch.DataLoader and saves the weights it ends with;
with --single, one process runs every replica on the same batches."""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import poptorch  # noqa: E402

import models  # noqa: E402
from datasets import Squares  # noqa: E402

STEPS, MICRO = 3, 2


class Reg(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(3, 8)
        self.l2 = torch.nn.Linear(8, 1)

    def forward(self, x, y):
        out = self.l2(torch.tanh(self.l1(x / 40))).squeeze(1)
        return out, torch.nn.functional.mse_loss(out, y.float() / 1000)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--single", type=int, default=0, help="replicas of one process (the reference)")
    p.add_argument("--save", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    model = Reg()
    if a.single:
        opts = poptorch.Options().replicationFactor(a.single)
        batches = _reference_batches(a.single)
    else:
        import popdist.poptorch
        opts = popdist.poptorch.Options()
        opts.randomSeed(0)
        loader = poptorch.DataLoader(opts, Squares(STEPS * MICRO * 4), batch_size=MICRO)
        batches = list(loader)
        print(f"instance {opts.Distributed.processId} of {opts.Distributed.numProcesses}: "
              f"{opts.replication_factor} replicas, first sample {int(batches[0][0][0, 0])}")
    trainer = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5))
    for x, y in batches:
        trainer(x, y)
    if a.single or opts.Distributed.processId == 0:
        np.savez(a.save, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


def _reference_batches(replicas):
    """The batches of the 2 instances side by side: instance 1's replicas follow instance 0's."""
    data = Squares(STEPS * MICRO * 4)
    per_instance = STEPS * MICRO * replicas // 2
    out = []
    for s in range(STEPS):
        idx = []
        for inst in range(2):
            start = inst * per_instance + s * MICRO * replicas // 2
            idx += list(range(start, start + MICRO * replicas // 2))
        xs, ys = zip(*(data[i] for i in idx))
        out.append((torch.stack(xs), torch.stack(ys)))
    return out


if __name__ == "__main__":
    del models
    main()
