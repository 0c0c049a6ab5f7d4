"""Random ops: random_uniform, random_normal, dropout, shaped_dropout and create_random_seed.

The (2,) uint32 seed tensor is copied to every tile that holds part of the output (one exchange,
multicast), and one supervisor vertex per piece draws its elements from the counter-based
generator of codelets.rng, keyed by the seed and counted by each element's index in the whole
output: the numbers do not depend on the tile mapping, and the same seed gives the same numbers.
"""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks
from ..registry import lowering_rule


def _seeds_on(ctx, seed: ipu.Tensor, tiles: np.ndarray, suffix="seed"):
    """A (tiles used, 2) copy of the seed, row k on the k-th distinct tile; the row of each tile."""
    uniq = np.unique(tiles)
    v = ctx.g.add_variable(ctx.name(suffix), (len(uniq), 2), ipu.UINT32, ipu.TEMPORARY, debug=ctx.name())
    v.tile_of[:] = np.repeat(uniq, 2).astype(np.int32)
    ctx.copy(seed.reshape(1, 2).broadcast((len(uniq), 2)), v, suffix)
    return v, np.searchsorted(uniq, tiles)


def _generate(ctx, codelet, out: ipu.Variable, seed: ipu.Tensor, fp, x=None):
    tiles, starts, counts = ctx.pieces(out)
    if not len(tiles):
        return
    seeds, row = _seeds_on(ctx, seed, tiles)
    fields = {"seed": (seeds, row * 2, 2), "out": (out, starts, counts)}
    if x is not None:
        fields["in"] = (x, starts, counts)
    cs = ctx.compute_set(codelet)
    ctx.g.add_vertices(cs, codelet, tiles, fields, fp=fp, ip={"first": starts})
    ctx.emit(ipu.Execute(cs, name=cs.name))


@lowering_rule("random_uniform")
def random_uniform(ctx, op):
    out = ctx.new_output(op, 0)
    _generate(ctx, "RandomUniform", out, ctx.value(op.inputs[0]), {"low": op.attrs["low"], "high": op.attrs["high"]})


@lowering_rule("random_normal")
def random_normal(ctx, op):
    out = ctx.new_output(op, 0)
    _generate(ctx, "RandomNormal", out, ctx.value(op.inputs[0]), {"mean": op.attrs["mean"], "std": op.attrs["std"]})


def _dropout(ctx, x: ipu.Tensor, seed: ipu.Tensor, ratio: float, name: str) -> ipu.Variable:
    out = ctx.new_var(x.shape, x.dtype, ctx.name(name), like=x if x.is_identity else None)
    if out.numel:
        xl = ctx.like(x, out)
        _generate(ctx, "Dropout", out, seed, {"ratio": ratio, "scale": 1.0 / (1.0 - ratio)}, x=xl)
    return out


@lowering_rule("dropout")
def dropout(ctx, op):
    x, seed = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    ctx.bind(op.outputs[0], _dropout(ctx, x, seed, float(op.attrs["ratio"]), op.outputs[0].id))


@lowering_rule("shaped_dropout")
def shaped_dropout(ctx, op):
    """One keep / drop decision per element of `shape`, broadcast over t: the mask (0 or
    1 / (1 - ratio)) is a Dropout of ones, then t is multiplied by it."""
    x, seed = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    shape = tuple(op.attrs["shape"])
    if x.numel == 0:
        ctx.new_output(op, 0)
        return
    ones = ctx.g.add_constant(ctx.name("ones"), np.ones(shape, x.dtype.numpy), x.dtype)
    ctx.tiles.map(ctx.g, ones)
    mask = _dropout(ctx, ones, seed, float(op.attrs["ratio"]), "mask")
    ctx.bind(op.outputs[0], blocks.binary(ctx, "mul", x, mask, shape=x.shape, suffix="shaped_dropout"))


@lowering_rule("create_random_seed")
def create_random_seed(ctx, op):
    seed, modifier = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    out = ctx.new_output(op, 0)
    tile = int(out.tile_of[0])
    s = ctx.g.add_variable(ctx.name("seed"), (2,), ipu.UINT32, ipu.TEMPORARY, debug=ctx.name())
    m = ctx.g.add_variable(ctx.name("modifier"), (1,), modifier.dtype, ipu.TEMPORARY, debug=ctx.name())
    ctx.g.set_tile_mapping(s, tile)
    ctx.g.set_tile_mapping(m, tile)
    ctx.copy(seed.reshape(2), s, "seed")
    ctx.copy(modifier.reshape(1), m, "modifier")
    cs = ctx.compute_set("modify_seed")
    ctx.g.add_vertex(cs, "ModifySeed", tile, seed=s, modifier=m, out=out)
    ctx.emit(ipu.Execute(cs, name=cs.name))
