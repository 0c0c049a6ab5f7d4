"""Layout ONNX ops: Reshape, Flatten, Transpose, (Un)Squeeze, Concat, Slice, Split, Gather, Expand,
Pad, Tile; Shape, Size, Constant, ConstantOfShape and Cast. Shapes, axes and slice bounds are host
constants (opset >= 10 passes them as inputs; they must fold to constants)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

import popxl
import popxl.ops as ops

from .context import GRAPHCORE, device_numpy_type, onnx_op


def _ints(v) -> list:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _reshape_target(node, in_shape, shape):
    shape = list(shape)
    allowzero = int(node.attr("allowzero", 0) or 0)
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise node.error(f"shape {shape}: a 0 at position {i} copies a dimension the input (shape "
                                 f"{list(in_shape)}) does not have")
            shape[i] = in_shape[i]
    if shape.count(-1) > 1:
        raise node.error(f"shape {shape} has more than one -1")
    n = int(np.prod(in_shape))
    if -1 in shape:
        rest = int(np.prod([d for d in shape if d != -1]))
        if rest == 0 or n % rest:
            raise node.error(f"cannot reshape {list(in_shape)} into {shape}")
        shape[shape.index(-1)] = n // rest
    if int(np.prod(shape)) != n:
        raise node.error(f"cannot reshape a tensor of shape {list(in_shape)} ({n} elements) into {shape}")
    return tuple(shape)


@onnx_op("Reshape", attrs=("shape", "allowzero"))
def reshape(node):
    shape = node.attr("shape") if node.version < 5 or not node.has_input(1) else _ints(node.const(1, "shape"))
    x = node.value(0)
    target = _reshape_target(node, x.shape, shape)
    if isinstance(x, np.ndarray):
        return x.reshape(target)
    return ops.reshape(x, target)


@onnx_op("Reshape", domain=GRAPHCORE, attrs=("shape",))
def gc_reshape(node):
    x = node.input(0)
    return ops.reshape(x, _reshape_target(node, x.shape, node.attr("shape")))


@onnx_op("Flatten", attrs=("axis",))
def flatten(node):
    x = node.input(0)
    axis = int(node.attr("axis", 1))
    if axis < 0:
        axis += x.rank
    outer = int(np.prod(x.shape[:axis])) if axis else 1
    return ops.reshape(x, (outer, int(np.prod(x.shape[axis:]))))


@onnx_op("Transpose", attrs=("perm",))
def transpose(node):
    x = node.input(0)
    perm = node.attr("perm")
    return ops.transpose(x, tuple(int(p) for p in perm) if perm else None)


def _axes(node, attr_name="axes", input_index=1):
    if node.has_attr(attr_name):
        return _ints(node.attr(attr_name))
    if node.has_input(input_index):
        return _ints(node.const(input_index, attr_name))
    return None


@onnx_op("Squeeze", attrs=("axes",))
def squeeze(node):
    x = node.value(0)
    axes = _axes(node)
    if isinstance(x, np.ndarray):
        return np.squeeze(x, axis=tuple(axes) if axes is not None else None)
    return ops.squeeze(x, [a % x.rank for a in axes] if axes is not None else None)


@onnx_op("Unsqueeze", attrs=("axes",))
def unsqueeze(node):
    x = node.value(0)
    axes = _axes(node)
    rank = len(x.shape) + len(axes)
    axes = sorted(a % rank for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    if isinstance(x, np.ndarray):
        return x.reshape(shape)
    return ops.reshape(x, tuple(shape))


@onnx_op("Concat", attrs=("axis",))
def concat(node):
    axis = int(node.attr("axis"))
    ins = [node.input(i) for i in range(node.num_inputs) if node.has_input(i)]
    ins = [t for t in ins if t.nelms > 0] or ins[:1]
    return ops.concat(ins, axis) if len(ins) > 1 else ops.identity(ins[0])


@onnx_op("Slice", attrs=("starts", "ends", "axes", "steps"))
def slice_(node):
    x = node.input(0)
    if node.version < 10:
        starts, ends = _ints(node.attr("starts")), _ints(node.attr("ends"))
        axes = _ints(node.attr("axes")) if node.has_attr("axes") else list(range(len(starts)))
        steps = [1] * len(starts)
    else:
        starts, ends = _ints(node.const(1, "starts")), _ints(node.const(2, "ends"))
        axes = _ints(node.const(3, "axes")) if node.has_input(3) else list(range(len(starts)))
        steps = _ints(node.const(4, "steps")) if node.has_input(4) else [1] * len(starts)
    return _slice(node, x, starts, ends, axes, steps)


def _slice(node, x, starts, ends, axes, steps):
    st, sp, ss, ax = [], [], [], []
    for s, e, a, k in zip(starts, ends, axes, steps):
        a = a % x.rank
        dim = x.shape[a]
        if k == 0:
            raise node.error("a slice step of 0 is not allowed")
        # clamp as ONNX does (INT64_MAX / INT64_MIN mean "to the end")
        s = max(-dim - 1, min(dim, s))
        e = max(-dim - 1, min(dim, e))
        if k > 0:
            s, e = (s + dim if s < 0 else s), (e + dim if e < 0 else e)
            s, e = max(0, min(dim, s)), max(0, min(dim, e))
        else:
            s = s + dim if s < 0 else s
            s = max(-1, min(dim - 1, s))
            e = e + dim if e < -1 or (e < 0 and e != -dim - 1) else e
            e = None if e < 0 else e
        st.append(s)
        sp.append(e)
        ss.append(k)
        ax.append(a)
    return ops.slice(x, start=st, stop=sp, step=ss, axis=ax)


@onnx_op("Slice", domain=GRAPHCORE, attrs=("starts", "ends", "axes"))
def gc_slice(node):
    x = node.input(0)
    starts, ends = _ints(node.attr("starts")), _ints(node.attr("ends"))
    axes = _ints(node.attr("axes"))
    return _slice(node, x, starts, ends, axes, [1] * len(starts))


@onnx_op("Split", attrs=("axis", "split", "num_outputs"))
def split(node):
    x = node.input(0)
    axis = int(node.attr("axis", 0))
    if node.has_attr("split"):
        sizes = _ints(node.attr("split"))
    elif node.has_input(1):
        sizes = _ints(node.const(1, "split"))
    else:
        n = node.num_outputs
        dim = x.shape[axis % x.rank]
        chunk = -(-dim // n)
        sizes = [min(chunk, dim - i * chunk) for i in range(n)]
    return ops.split(x, sizes, axis)


@onnx_op("Gather", attrs=("axis",))
def gather(node):
    x = node.input(0)
    axis = int(node.attr("axis", 0)) % x.rank
    if node.is_const(1):
        idx = np.asarray(node.const(1, "indices")).astype(np.int64)
        idx = np.where(idx < 0, idx + x.shape[axis], idx).astype(np.int32)
        if idx.ndim == 0:  # one slice: no index tensor needed
            out = ops.slice(x, start=[int(idx)], stop=[int(idx) + 1], axis=[axis])
            return ops.squeeze(out, [axis])
        indices = popxl.constant(idx, name="indices")
    else:
        indices = node.input(1)
        if not indices.dtype.is_int:
            raise node.error(f"indices must be integers, not {indices.dtype.name}")
    return ops.gather(x, indices, axis)


@onnx_op("Expand")
def expand(node):
    x = node.input(0)
    shape = tuple(np.broadcast_shapes(tuple(x.shape), tuple(_ints(node.const(1, "shape")))))
    if shape == tuple(x.shape):
        return ops.identity(x)
    zeros = popxl.constant(np.zeros(shape, x.dtype.as_numpy()), name="expand_zeros")
    return ops.add(x, zeros) if x.dtype != popxl.bool else ops.logical_or(x, popxl.constant(np.zeros(shape, bool)))


@onnx_op("Tile")
def tile(node):
    x = node.input(0)
    reps = _ints(node.const(1, "repeats"))
    for axis, r in enumerate(reps):
        if r != 1:
            x = ops.concat([x] * r, axis)
    return x if any(r != 1 for r in reps) else ops.identity(x)


@onnx_op("Pad", attrs=("mode", "pads", "value"))
def pad(node):
    """Pad each axis by `pads` (before..., after...): PopART's PadOp modes constant, reflect (the
    border element not repeated) and edge (the border element repeated); a negative pad crops."""
    x = node.input(0)
    mode = node.attr("mode", "constant") or "constant"
    if mode not in ("constant", "reflect", "edge"):
        raise node.error(f"mode {mode!r} is not supported: PopART's Pad takes 'constant', 'reflect' or 'edge'")
    pads = _ints(node.attr("pads")) if node.has_attr("pads") else _ints(node.const(1, "pads"))
    value = float(node.attr("value", 0.0)) if node.version < 11 else (
        float(np.asarray(node.const(2, "constant_value")).reshape(-1)[0]) if node.has_input(2) else 0.0)
    r = x.rank
    if node.has_input(3):  # Pad-18: the pads are for these axes only
        axes = [a % r for a in _ints(node.const(3, "axes"))]
        if len(pads) != 2 * len(axes):
            raise node.error(f"pads has {len(pads)} values for the {len(axes)} axes {axes}: it needs {2 * len(axes)}")
        full = [0] * (2 * r)
        for k, a in enumerate(axes):
            full[a], full[a + r] = pads[k], pads[k + len(axes)]
        pads = full
    if len(pads) != 2 * r:
        raise node.error(f"pads has {len(pads)} values; a rank-{r} input needs {2 * r} (all befores, then all afters)")
    for a in range(r):
        before, after = pads[a], pads[a + r]
        if before < 0 or after < 0:  # crop first
            dim = x.shape[a]
            x = ops.slice(x, start=[max(0, -before)], stop=[dim - max(0, -after)], axis=[a])
            before, after = max(0, before), max(0, after)
        if not (before or after):
            continue
        dim = x.shape[a]
        if mode != "constant" and dim == 0:
            raise node.error(f"mode {mode!r} cannot pad axis {a}, which is empty")
        if mode == "reflect" and max(before, after) >= dim:
            raise node.error(f"mode 'reflect' pads axis {a} of size {dim} by {max(before, after)}: at most {dim - 1}")
        parts = []
        if before:
            parts.append(_pad_part(x, a, before, mode, value, True))
        parts.append(x)
        if after:
            parts.append(_pad_part(x, a, after, mode, value, False))
        x = ops.concat(parts, a)
    return x


def _pad_part(x, axis, n, mode, value, before):
    dim = x.shape[axis]
    if mode == "constant":
        shp = list(x.shape)
        shp[axis] = n
        return popxl.constant(np.full(shp, value, x.dtype.as_numpy()), name="pad_before" if before else "pad_after")
    if mode == "edge":
        edge = ops.slice(x, start=[0 if before else dim - 1], stop=[1 if before else dim], axis=[axis])
        return ops.concat([edge] * n, axis) if n > 1 else edge
    # reflect: n, n - 1, ..., 1 before; dim - 2, ..., dim - 1 - n after
    if before:
        return ops.slice(x, start=[n], stop=[0], step=[-1], axis=[axis])
    stop = dim - 2 - n
    return ops.slice(x, start=[dim - 2], stop=[stop if stop >= 0 else None], step=[-1], axis=[axis])


@onnx_op("Shape", attrs=("start", "end"))
def shape(node):
    shp = np.asarray(node.input_shape(0), np.int64)
    start, end = node.attr("start", 0) or 0, node.attr("end", None)
    return shp[start:end]


@onnx_op("Size")
def size(node):
    return np.asarray(int(np.prod(node.input_shape(0))), np.int64)


@onnx_op("Constant", attrs=("value", "value_float", "value_floats", "value_int", "value_ints", "sparse_value"))
def constant(node):
    if node.has_attr("value"):
        return numpy_helper.to_array(node.proto.attribute[[a.name for a in node.proto.attribute].index("value")].t)
    for name, dt in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                     ("value_ints", np.int64)):
        if node.has_attr(name):
            return np.asarray(node.attr(name), dt)
    raise node.error("has no value (sparse constants are not supported)")


@onnx_op("ConstantOfShape", attrs=("value",))
def constant_of_shape(node):
    shp = _ints(node.const(0, "shape"))
    v = node.attr("value")
    arr = numpy_helper.to_array(v) if v is not None else np.zeros(1, np.float32)
    return np.full(shp, arr.reshape(-1)[0], arr.dtype)


@onnx_op("Cast", attrs=("to", "saturate"))
def cast(node):
    to = int(node.attr("to"))
    x = node.value(0)
    if isinstance(x, np.ndarray):
        return x.astype(onnx.helper.tensor_dtype_to_np_dtype(to))
    dt = popxl.dtype.as_dtype(device_numpy_type(to))
    return ops.cast(x, dt) if dt != x.dtype else ops.identity(x)


@onnx_op("CastLike", attrs=("saturate",))
def cast_like(node):
    x, like = node.value(0), node.value(1)
    if isinstance(x, np.ndarray):
        return x.astype(like.dtype if isinstance(like, np.ndarray) else like.dtype.as_numpy())
    dt = popxl.dtype.as_dtype(to_device_type(like))
    return ops.cast(x, dt) if dt != x.dtype else ops.identity(x)


def to_device_type(t):
    if isinstance(t, np.ndarray):
        return np.dtype({np.dtype(np.int64): np.int32, np.dtype(np.float64): np.float32}.get(t.dtype, t.dtype))
    return t.dtype.as_numpy()


@onnx_op("OneHot", attrs=("axis",))
def one_hot(node):
    idx = node.input(0)
    depth = int(np.asarray(node.const(1, "depth")).reshape(-1)[0])
    values = node.input(2)
    axis = int(node.attr("axis", -1))
    if not idx.dtype.is_int:
        idx = ops.cast(idx, popxl.int32)
    return ops.onehot(idx, depth, values, axis % (idx.rank + 1))


@onnx_op("Trilu", attrs=("upper",))
def trilu(node):
    x = node.input(0)
    k = int(np.asarray(node.const(1, "k")).reshape(-1)[0]) if node.has_input(1) else 0
    n, m = x.shape[-2:]
    keep = np.triu(np.ones((n, m), bool), k) if int(node.attr("upper", 1)) else np.tril(np.ones((n, m), bool), k)
    zero = popxl.constant(np.zeros((), x.dtype.as_numpy()), name="zero")
    return ops.where(popxl.constant(keep, name="trilu_mask"), x, zero)


@onnx_op("DepthToSpace", attrs=("blocksize", "mode"))
def depth_to_space(node):
    x = node.input(0)
    bs, mode = int(node.attr("blocksize")), node.attr("mode", "DCR") or "DCR"
    n, c, h, w = x.shape
    if mode == "DCR":
        t = ops.transpose(ops.reshape(x, (n, bs, bs, c // bs ** 2, h, w)), (0, 3, 4, 1, 5, 2))
    else:
        t = ops.transpose(ops.reshape(x, (n, c // bs ** 2, bs, bs, h, w)), (0, 1, 4, 2, 5, 3))
    return ops.reshape(t, (n, c // bs ** 2, h * bs, w * bs))


@onnx_op("SpaceToDepth", attrs=("blocksize",))
def space_to_depth(node):
    x = node.input(0)
    bs = int(node.attr("blocksize"))
    n, c, h, w = x.shape
    t = ops.transpose(ops.reshape(x, (n, c, h // bs, bs, w // bs, bs)), (0, 3, 5, 1, 2, 4))
    return ops.reshape(t, (n, c * bs * bs, h // bs, w // bs))


@onnx_op("Init", domain=GRAPHCORE, attrs=("shape", "data_type", "tensor_type", "batch_axis"))
def init(node):
    shp = _ints(node.attr("shape"))
    dt = popxl.dtype.as_dtype(device_numpy_type(int(node.attr("data_type"))))
    return ops.init(tuple(shp), dt, "init", "zero" if int(node.attr("tensor_type", 0)) == 0 else "undef")


@onnx_op("Subsample", domain=GRAPHCORE, attrs=("strides",))
def subsample(node):
    return ops.subsample(node.input(0), _ints(node.attr("strides")))


@onnx_op("DynamicSlice", domain=GRAPHCORE, attrs=("axes", "sizes", "noOverlap"))
def dynamic_slice(node):
    return ops.dynamic_slice(node.input(0), node.input(1), _ints(node.attr("axes")), _ints(node.attr("sizes")),
                             bool(node.attr("noOverlap", 0)))


@onnx_op("DynamicUpdate", domain=GRAPHCORE, attrs=("axes", "sizes", "noOverlap"))
def dynamic_update(node):
    return ops.dynamic_update(node.input(0), node.input(1), node.input(2), _ints(node.attr("axes")),
                              _ints(node.attr("sizes")), bool(node.attr("noOverlap", 0)))


@onnx_op("Range")
def range_(node):
    start, limit, delta = (np.asarray(node.const(i)).reshape(()) for i in range(3))
    return np.arange(start, limit, delta).astype(start.dtype)



@onnx_op("Scatter", "ScatterElements", attrs=("axis", "reduction"))
def scatter(node):
    """ONNX Scatter (9, deprecated) and ScatterElements (11): a copy of data with
    out[..., indices[i, j], ...] = updates[i, j] along `axis` (PopART's ScatterOp, one op for the
    three: popxl's scatter, whose gradients are PopART's ScatterDataGrad and ScatterUpdateGrad).
    Negative indices count from the end of the axis."""
    reduction = node.attr("reduction", "none") or "none"
    if reduction != "none":
        raise node.error(f"reduction {reduction!r} is not supported: PopART's ScatterOp replaces (reduction "
                         f"'none', ScatterElements opset 11)")
    data, updates = node.input(0), node.input(2)
    axis = int(node.attr("axis", 0)) % data.rank
    if node.is_const(1):
        idx = np.asarray(node.const(1, "indices")).astype(np.int64)
        if np.any((idx < -data.shape[axis]) | (idx >= data.shape[axis])):
            raise node.error(f"indices must lie in [{-data.shape[axis]}, {data.shape[axis] - 1}] (axis {axis} of "
                             f"data {list(data.shape)})")
        indices = popxl.constant(np.where(idx < 0, idx + data.shape[axis], idx).astype(np.int32), name="indices")
    else:
        indices = node.input(1)
        if not indices.dtype.is_int:
            raise node.error(f"indices must be integers, not {indices.dtype.name}")
    if updates.dtype != data.dtype:
        raise node.error(f"updates ({updates.dtype.name}) must have the type of data ({data.dtype.name})")
    return ops.scatter(data, indices, updates, axis)
