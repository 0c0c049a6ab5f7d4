"""Random ATen ops on the IPU: drawn from popxl's generator (seeded by Options.randomSeed), so
checked by their statistics, and reproducible run to run."""
import torch
import torch.nn.functional as F

import poptorch


class Draws(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4000))

    def forward(self, x):
        a = torch.rand_like(self.w) + x
        b = torch.randn_like(self.w)
        c = torch.rand(4000) * 2
        d = torch.randn(4000) + 1
        e = torch.empty_like(self.w).uniform_(-3, 3)
        f = F.dropout(self.w, 0.25, training=True)
        g = torch.bernoulli(torch.full_like(self.w, 0.7))
        return a, b, c, d, e, f, g


def test_random_ops_statistics_and_seed(small_ipu):
    def run(seed):
        return poptorch.inferenceModel(Draws(), poptorch.Options().randomSeed(seed))(torch.zeros(1))

    a, b, c, d, e, f, g = run(5)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.03
    assert abs(b.mean()) < 0.06 and abs(b.std() - 1) < 0.06
    assert 0 <= c.min() and c.max() < 2 and abs(c.mean() - 1.0) < 0.06
    assert abs(d.mean() - 1) < 0.06
    assert -3 <= e.min() and e.max() < 3 and abs(e.mean()) < 0.15
    kept = f != 0
    assert abs(kept.float().mean() - 0.75) < 0.03 and torch.allclose(f[kept], torch.full_like(f[kept], 1 / 0.75))
    assert set(g.unique().tolist()) <= {0.0, 1.0} and abs(g.mean() - 0.7) < 0.03
    again = run(5)
    assert all(torch.equal(x, y) for x, y in zip((a, b, c, d, e, f, g), again))
    assert not torch.equal(run(6)[0], a)
