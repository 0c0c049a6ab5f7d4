"""Inference of a BERT-style encoder with PopTorch on the simulated IPU, checked against PyTorch.

    python examples/poptorch/bert_encoder_inference.py [--layers 2] [--hidden 128] [--heads 4] [--seq 32]
                                                       [--batch 2] [--device-iterations 2] [--ipus 1]

Embeddings (word, position, token type) with layer norm, `--layers` post-LN transformer layers
(self-attention with the padding mask, GELU feed-forward) and BERT's tanh pooler, written as a
plain torch.nn.Module; `--ipus 2` splits the layers over two simulated IPUs with
poptorch.BeginBlock (a pipeline: PopTorch needs deviceIterations >= 2 then). BERT-base is
`--layers 12 --hidden 768 --heads 12 --seq 128`. Prints capture + compile time, time per call,
simulated cycles per call and the largest error against PyTorch on the CPU.
"""
from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import poptorch


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.output = nn.Linear(hidden, hidden)

    def forward(self, x, mask_bias):
        b, s, h = x.shape

        def split(t):
            return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + mask_bias
        context = F.softmax(scores, dim=-1) @ v
        return self.output(context.transpose(1, 2).reshape(b, s, h))


class Layer(nn.Module):
    def __init__(self, hidden, heads, ff):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ff)
        self.output = nn.Linear(ff, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask_bias):
        x = self.attention_norm(x + self.attention(x, mask_bias))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class BertEncoder(nn.Module):
    def __init__(self, vocab=1000, hidden=128, heads=4, layers=2, seq=32, types=2):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(seq, hidden)
        self.token_type = nn.Embedding(types, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(Layer(hidden, heads, 4 * hidden) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids, token_type_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1])
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.embedding_norm(x)
        mask_bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--batch", type=int, default=2, help="micro-batch size")
    p.add_argument("--device-iterations", type=int, default=2)
    p.add_argument("--ipus", type=int, default=1, choices=(1, 2))
    p.add_argument("--calls", type=int, default=3)
    a = p.parse_args(argv)

    torch.manual_seed(0)
    model = BertEncoder(hidden=a.hidden, heads=a.heads, layers=a.layers, seq=a.seq).eval()
    if a.ipus == 2:
        poptorch.BeginBlock(model.layers[a.layers // 2], "second_half", ipu_id=1)
    n = a.batch * a.device_iterations
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, 1000, (n, a.seq), generator=g)
    token_types = (torch.arange(a.seq) >= a.seq // 2).long().expand(n, a.seq).contiguous()
    lengths = torch.randint(a.seq // 2, a.seq + 1, (n,), generator=g)
    attention_mask = (torch.arange(a.seq)[None, :] < lengths[:, None]).long()

    opts = poptorch.Options().deviceIterations(a.device_iterations)
    ipu_model = poptorch.inferenceModel(model, opts)
    t0 = time.perf_counter()
    hidden, pooled = ipu_model(input_ids, token_types, attention_mask)
    first = time.perf_counter() - t0
    times = []
    for _ in range(a.calls - 1):
        t0 = time.perf_counter()
        ipu_model(input_ids, token_types, attention_mask)
        times.append(time.perf_counter() - t0)
    with torch.no_grad():
        want_hidden, want_pooled = model(input_ids, token_types, attention_mask)
    err = max(float((hidden - want_hidden).abs().max()), float((pooled - want_pooled).abs().max()))
    s = ipu_model._session
    cycles = s.total_cycles / a.calls
    print(f"BERT-style encoder: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, sequence {a.seq}, "
          f"{n} sequences per call on {s.ipus_per_replica} IPU(s) ({s.target.name})")
    print(f"capture + translation {ipu_model.capture_seconds:.2f} s, simulated compile {ipu_model.compile_seconds:.2f} "
          f"s, first call {first:.2f} s in all")
    if times:
        print(f"per call: {min(times) * 1e3:.0f} ms wall, {cycles:,.0f} simulated cycles "
              f"({cycles / s.target.clock_hz * 1e3:.3f} ms on the IPU)")
    print(f"largest difference from PyTorch on the CPU: {err:.2e}")
    assert err < 1e-3, err
    ipu_model.destroy()
    return {"error": err, "cycles": cycles, "hidden": hidden, "pooled": pooled}


if __name__ == "__main__":
    main()
