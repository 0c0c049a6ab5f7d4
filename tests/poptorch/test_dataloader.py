"""poptorch.DataLoader: one model call's worth of samples per batch; the Async modes read through
a worker process (AsynchronousDataAccessor) and give the same batches."""
import pytest
import torch

import poptorch

from datasets import Squares, Stream


def _opts(di=2, rf=2, ga=1):
    o = poptorch.Options().deviceIterations(di).replicationFactor(rf)
    o.Training.gradientAccumulation(ga)
    return o


def test_combined_batch_size_and_epochs():
    loader = poptorch.DataLoader(_opts(2, 3, 2), Squares(50), batch_size=2)
    assert loader.combinedBatchSize == 24 and len(loader) == 2
    batches = list(loader)
    assert [b[0].shape[0] for b in batches] == [24, 24]
    assert torch.equal(batches[1][1], torch.arange(24, 48) ** 2)
    with pytest.raises(poptorch.Error, match="not divisible .* drop_last=False"):
        poptorch.DataLoader(_opts(), Squares(50), batch_size=2, drop_last=False)


def test_distributed_processes_read_their_share():
    opts = _opts(1, 2)
    opts.Distributed.configureProcessId(1, 2)
    loader = poptorch.DataLoader(opts, Squares(20), batch_size=2)
    firsts = [int(b[0][0, 0]) for b in loader]
    assert firsts == [8, 12]  # 2 processes x 2 steps of 4 samples; this one reads samples 8..15


@pytest.mark.parametrize("mode,sharing", [
    # a spawned worker imports PyTorch afresh (tens of seconds on a busy host)
    pytest.param(poptorch.DataLoaderMode.Async, poptorch.SharingStrategy.FileSystem, marks=pytest.mark.slow),
    (poptorch.DataLoaderMode.AsyncRebatched, poptorch.SharingStrategy.Fork)])
def test_async_modes_give_the_sync_batches(mode, sharing):
    """The worker process (spawned, as PopTorch starts it, or forked) runs a loader with two
    worker processes of its own."""
    want = [b[1] for b in poptorch.DataLoader(_opts(), Squares(48), batch_size=3, num_workers=0)]
    loader = poptorch.DataLoader(_opts(), Squares(48), batch_size=3, num_workers=2, mode=mode,
                                 async_options={"sharing_strategy": sharing})
    try:
        for _ in range(2):  # two epochs through the same worker process
            got = [b[1] for b in loader]
            assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))
    finally:
        loader.terminate()


def test_asynchronous_data_accessor_forked_and_iterable():
    acc = poptorch.AsynchronousDataAccessor(poptorch.DataLoader(_opts(1, 1), Stream(7), batch_size=2),
                                            sharing_strategy=poptorch.SharingStrategy.Fork, load_indefinitely=False)
    try:
        got = torch.cat([b.reshape(-1) for b in acc])
        assert torch.equal(got, torch.arange(6, dtype=torch.float32))
    finally:
        acc.terminate()


def test_training_from_an_async_loader(small_ipu):
    class Reg(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(3, 1)

        def forward(self, x, y):
            out = self.l(x).squeeze(1)
            return out, torch.nn.functional.mse_loss(out, y.float() / 1000)

    opts = _opts(2, 1)
    model = Reg()
    trainer = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=1e-4))
    loader = poptorch.DataLoader(opts, Squares(24), batch_size=4, mode=poptorch.DataLoaderMode.Async,
                                 async_options={"sharing_strategy": poptorch.SharingStrategy.Fork})
    try:
        losses = [float(trainer(x, y)[1]) for x, y in loader]
    finally:
        loader.terminate()
    assert len(losses) == 3
