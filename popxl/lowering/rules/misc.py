"""print_tensor, init, histogram and io_tile_copy.

print_tensor is what Poplar's PrintTensor program is: a device-to-host transfer into a stream
whose host callback prints (ipu.HostStream.callback). The engine calls it right after the
transfer, so prints appear in program order while the program runs (inside loops, once per
iteration), and the transfer costs what any device-to-host copy of the tensor costs. The op's
output is an on-tile copy of the input.
"""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks
from ..columns import split
from ..print_format import PrintFormat, format_tensor
from ..registry import lowering_rule
from .shape import materialise


class TensorPrinter:
    """Host callback of a print_tensor stream: writes `title: <tensor>` in Poplar's PrintTensor
    format (print_format.py) to standard error, where Poplar prints."""

    def __init__(self, title: str, attrs: dict, out=None):
        self.title = title
        self.fmt = PrintFormat.from_attrs(attrs)
        self.out = out  # a file-like object, or None for sys.stderr at call time

    def format(self, array: np.ndarray) -> str:
        return format_tensor(array, self.fmt)

    def __call__(self, array: np.ndarray, replica: int) -> None:
        import sys

        if array.dtype.names and array.dtype.names[0] in ("float8_143", "float8_152"):
            from codelets.float8 import host_decode  # float8 prints its values (unscaled)
            array = host_decode(np.ascontiguousarray(array).view(np.uint8), array.dtype.names[0]).reshape(array.shape)

        prefix = f"{self.title}" if replica == 0 else f"{self.title} (replica {replica})"
        print(f"{prefix}: {self.format(array)}", file=self.out or sys.stderr, flush=True)


@lowering_rule("print_tensor")
def print_tensor(ctx, op):
    x = ctx.value(op.inputs[0])
    t_out = op.outputs[0]
    out = ctx.new_output(op, 0, like=x if x.is_identity else None)
    ctx.copy(x, out, "copy")
    if op.attrs.get("print_self", True) and x.numel:
        et = ctx.etype(op.inputs[0])
        name = f"print_tensor/{op.id}/{op.name}"
        stream = ctx.g.add_device_to_host_stream(name, tuple(t_out.shape), et,
                                                 callback=TensorPrinter(op.attrs.get("title") or op.inputs[0].name,
                                                                        op.attrs))
        ctx.emit(ipu.DeviceToHost(out, stream, name=ctx.name("print")))


@lowering_rule("init")
def init(ctx, op):
    """A new tensor; 'zero' fills it with Fill vertices (popops::zero), 'undef' leaves whatever
    the memory holds."""
    t_out = op.outputs[0]
    et = ctx.etype(t_out)
    if op.attrs.get("init_type", "zero") == "zero" and t_out.nelms:
        out = blocks.elementwise(ctx, "Fill", [], [], tuple(t_out.shape), et, fp={"value": 0.0}, suffix="init")
        ctx.bind(t_out, out)
    else:
        ctx.new_output(op, 0)


@lowering_rule("histogram")
def histogram(ctx, op):
    """Each tile counts its own elements (Histogram vertices, one per worker part of each piece,
    with the limits copied to the tile); the partial counts are exchanged to the output's tile and
    summed (HistogramCombine), as popops::histogram reduces its per-tile partials."""
    x = ctx.value(op.inputs[0])
    if not x.dtype.is_float:
        raise TypeError(f"histogram {op.name!r}: the simulator's Histogram vertex takes float32 or float16 data, "
                        f"not {x.dtype.name}; cast it first")
    levels = np.asarray(op.attrs["levels"], np.float64)
    L = levels.size
    nb = L + 1
    out = ctx.new_output(op, 0)
    ctx.g.set_tile_mapping(out, int(out.tile_of[0]))  # the whole histogram on one tile
    if x.numel == 0:
        cs = ctx.compute_set("histogram")
        ctx.g.add_vertices(cs, "Fill", [int(out.tile_of[0])], {"out": (out, 0, nb)}, fp={"value": 0.0})
        ctx.emit(ipu.Execute(cs, name=cs.name))
        return
    # the data as whole pieces: in place when x is a variable, else copied where its elements live
    if x.is_identity:
        data = x.variable
    else:
        data = ctx.g.add_variable(ctx.name("histogram/data"), (x.numel,), x.dtype, ipu.TEMPORARY, debug=ctx.name())
        data.tile_of[:] = x.variable.tile_of[x.flat_index()]
        ctx.copy(x.reshape(x.numel), data, "histogram/data")
    p_tiles, p_starts, p_counts = ctx.pieces(data)
    v_tiles, v_starts, v_counts = [], [], []  # of each vertex
    for t, s0, c0 in zip(p_tiles, p_starts, p_counts):
        ss, cc = split(int(c0), ctx.target.worker_contexts)
        for s, c in zip(ss, cc):
            v_tiles.append(int(t))
            v_starts.append(int(s0 + s))
            v_counts.append(int(c))
    tiles, starts, counts = (np.asarray(a, np.int64) for a in (v_tiles, v_starts, v_counts))
    nv = len(tiles)
    uniq = np.unique(tiles)
    limits = ctx.g.add_constant(ctx.name("histogram/limits"), np.tile(levels.astype(x.dtype.numpy), (len(uniq), 1)),
                                x.dtype)
    limits.tile_of[:] = np.repeat(uniq, L).astype(np.int32)
    partials = ctx.g.add_variable(ctx.name("histogram/partials"), (nv, nb), ipu.UINT32, ipu.TEMPORARY,
                                  debug=ctx.name())
    partials.tile_of[:] = np.repeat(tiles, nb).astype(np.int32)
    cs = ctx.compute_set("histogram")
    row = np.searchsorted(uniq, tiles)
    ctx.g.add_vertices(cs, "Histogram", tiles,
                       {"data": (data, starts, counts), "limits": (limits, row * L, L),
                        "out": (partials, np.arange(nv) * nb, nb)},
                       ip={"absolute": int(bool(op.attrs["absolute_of_input"]))})
    ctx.emit(ipu.Execute(cs, name=cs.name))
    tile = int(out.tile_of[0])
    gathered = ctx.g.add_variable(ctx.name("histogram/gathered"), (nv * nb,), ipu.UINT32, ipu.TEMPORARY,
                                  debug=ctx.name())
    ctx.g.set_tile_mapping(gathered, tile)
    ctx.copy(partials.reshape(nv * nb), gathered, "histogram/gather")
    cs = ctx.compute_set("histogram/combine")
    ctx.g.add_vertices(cs, "HistogramCombine", [tile], {"partials": (gathered, 0, nv * nb), "out": (out, 0, nb)})
    ctx.emit(ipu.Execute(cs, name=cs.name))


@lowering_rule("io_tile_copy")
def io_tile_copy(ctx, op):
    # The simulated target has no IO tiles (every tile computes): the copy stays where the data lives.
    materialise(ctx, op.outputs[0], ctx.value(op.inputs[0]), "io_tile_copy")
