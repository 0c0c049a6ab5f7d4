"""Random popxl programs for the fuzz tests: a plain-data description, the Ir it builds, and what
the NumPy reference interpreter says it computes.

A description is a dict of lists and ints, so Hypothesis shrinks it and prints it readably when a
program fails. Building it is deterministic: every op step names its operands by index into the
tensors built so far (modulo their number) and adapts its parameters to their shapes, so any
description builds a valid program.
"""
from __future__ import annotations

import numpy as np

import popxl
import popxl.ops as ops

from popxl import reference as _ref

DTYPES = {"float32": popxl.float32, "float16": popxl.float16, "int32": popxl.int32}

UNARY_FLOAT = ["abs", "negate", "relu", "tanh", "sin", "cos", "exp_tanh", "gelu", "swish", "sqrt_abs"]
UNARY_INT = ["abs", "negate"]
DISCONTINUOUS = ["floor", "ceil", "sign"]  # only on tensors known exactly (a tiny error would flip them)
BINARY = ["add", "sub", "mul", "maximum", "div"]
REDUCE = ["sum", "mean", "max", "min"]
SHAPE = ["transpose", "reshape_flat", "slice_half", "concat_self", "gather", "dynamic_slice", "dynamic_update",
         "subsample", "split_first", "where", "cumsum", "topk", "argmax_cast"]
FLOAT_ONLY = ["softmax", "matmul", "cast_round_trip", "clip", "group_norm", "scatter", "conv", "pool",
              "reduce_more", "pow_fmod"]
INPLACE = ["add_", "relu_", "scaled_add_", "dynamic_update_", "view_add_"]
OPS_FLOAT = UNARY_FLOAT + DISCONTINUOUS + BINARY + REDUCE + SHAPE + FLOAT_ONLY + INPLACE
OPS_INT = UNARY_INT + ["add", "sub", "mul", "maximum", "div"] + ["sum", "max", "min"] + SHAPE + ["add_",
                                                                                                "dynamic_update_",
                                                                                                "view_add_"]
# ops whose float result is exactly what NumPy computes (elementwise IEEE ops, data movement)
_EXACT = {"abs", "negate", "relu", "add", "sub", "mul", "maximum", "max", "min", "transpose", "reshape_flat",
          "slice_half", "concat_self", "gather", "dynamic_slice", "floor", "ceil", "sign", "add_", "relu_",
          "subsample", "split_first", "where", "dynamic_update", "dynamic_update_", "argmax_cast", "topk"}


class Built:
    """The Ir of a description and what the reference needs to check it."""

    def __init__(self, ir, streams, outputs, variable, inputs):
        self.ir = ir
        self.streams = streams  # HostToDeviceStream per input
        self.outputs = outputs  # DeviceToHostStream per output
        self.variable = variable  # popxl Variable updated in place, or None
        self.inputs = inputs  # host data per stream


def input_data(desc) -> list[np.ndarray]:
    rng = np.random.default_rng(desc["seed"])
    out = []
    for shape in desc["inputs"]:
        if desc["dtype"] == "int32":
            out.append(rng.integers(-6, 7, size=shape).astype(np.int32))
        else:
            out.append(rng.uniform(-2, 2, size=shape).astype(DTYPES[desc["dtype"]].as_numpy()))
    return out


class _Builder:
    """Applies op steps to a pool of tensors inside the current graph."""

    def __init__(self, desc, pool, exact, fresh):
        self.desc = desc
        self.dtype = DTYPES[desc["dtype"]]
        self.pool = pool  # tensors so far
        self.exact = exact  # parallel: is the value known exactly (for discontinuous ops)
        self.fresh = fresh  # parallel: produced by a non-view op of this graph (may be updated in place)

    def pick(self, k):
        return k % len(self.pool)

    def const(self, data):
        return popxl.constant(np.asarray(data).astype(self.dtype.as_numpy()))

    def scalar_of(self, t):
        """A rank-0 summary of t that broadcasts with anything."""
        return ops.max(t) if t.rank else t

    def fit(self, a, b):
        """b, or something made from it that broadcasts to a's shape."""
        try:
            if np.broadcast_shapes(a.shape, b.shape) == a.shape:
                return b
        except ValueError:
            pass
        return self.scalar_of(b)

    def step(self, op):
        name, i, j, p = op
        a = self.pool[self.pick(i)]
        ea = self.exact[self.pick(i)]
        b = self.pool[self.pick(j)]
        eb = self.exact[self.pick(j)]
        fl = self.desc["dtype"] != "int32"
        out, exact, fresh = self._apply(name, a, b, p, fl, ea, eb, self.pick(i))
        if out is not None:
            self.pool.append(out)
            self.exact.append(exact)
            self.fresh.append(fresh)

    def _apply(self, name, a, b, p, fl, ea, eb, ia):
        if name in DISCONTINUOUS:
            if not ea:
                name = "abs"
            else:
                return getattr(ops, name)(a), True, True
        if name in UNARY_FLOAT or name in UNARY_INT:
            if name == "exp_tanh":
                return ops.exp(ops.tanh(a)), False, True
            if name == "sqrt_abs":
                return ops.sqrt(ops.abs(a)), False, True
            return getattr(ops, name)(a), name in _EXACT and ea, True
        if name in BINARY:
            b2 = self.fit(a, b)
            exact = ea and eb and b2 is b
            if name == "div":
                if not fl:  # integer division; the divisor kept away from 0
                    return ops.div(a, ops.add(ops.abs(b2), self.const(1))), exact, True
                return ops.div(a, ops.abs(b2) + 1.0), False, True
            if name == "maximum":
                return ops.maximum(a, b2), exact, True
            return getattr(ops, name)(a, b2), exact, True
        if name in REDUCE:
            if a.rank == 0:
                return ops.negate(a), ea, True
            axis = p % a.rank
            keep = bool(p // a.rank % 2)
            return getattr(ops, name)(a, axis=axis, keepdims=keep), ea and name in ("max", "min"), True
        if name == "softmax":
            if a.rank == 0:
                return ops.tanh(a), False, True
            return ops.softmax(a, axis=p % a.rank), False, True
        if name == "matmul":
            n = 1 + p % 9
            k = a.shape[-1] if a.rank else 1
            x = a if a.rank else ops.reshape(a, (1,))
            w = self.const(np.random.default_rng(p).uniform(-1, 1, size=(k, n)))
            return ops.matmul(x, w), False, True
        if name == "cast_round_trip":
            other = popxl.float16 if self.dtype == popxl.float32 else popxl.float32
            return ops.cast(ops.cast(a, other), self.dtype), False, True
        if name == "transpose":
            return ops.transpose(a), ea, True
        if name == "reshape_flat":
            return ops.reshape(a, (int(np.prod(a.shape)),)), ea, True
        if name == "slice_half":
            if a.rank == 0 or a.shape[0] < 2:
                return ops.negate(a), ea, True
            return ops.slice(a, start=[a.shape[0] // 2], stop=[a.shape[0]], axis=[0]), ea, True
        if name == "concat_self":
            if a.rank == 0:
                return ops.abs(a), ea, True
            return ops.concat([a, b if b.shape == a.shape else a], axis=p % a.rank), ea and (b.shape != a.shape or eb), True
        if name == "gather":
            if a.rank == 0:
                return ops.relu(a), ea, True
            rows = a.shape[0]
            idx = np.random.default_rng(p).integers(0, rows, size=1 + p % 5)
            return ops.gather(a, popxl.constant(idx.astype(np.int32)), axis=0), ea, True
        if name == "dynamic_slice":
            if a.rank == 0:
                return ops.relu(a), ea, True
            rows = a.shape[0]
            size = 1 + p % rows
            off = (p // 7) % (rows - size + 1)
            index = popxl.constant(np.array([off], np.uint32))
            return ops.dynamic_slice(a, index, axes=[0], sizes=[size], no_overlap=True), ea, True
        if name == "dynamic_update" or name == "dynamic_update_":
            if a.rank == 0:
                return ops.negate(a), ea, True
            rows = a.shape[0]
            size = 1 + p % rows
            off = (p // 7) % (rows - size + 1)
            upd = self.const(np.random.default_rng(p).integers(-3, 4, size=(size,) + a.shape[1:]))
            index = popxl.constant(np.array([off], np.uint32))
            if name == "dynamic_update_":
                if not self.fresh[ia]:
                    return ops.negate(a), ea, True
                ops.dynamic_update_(a, index, upd, axes=[0], sizes=[size], no_overlap=True)
                return None, None, None
            return ops.dynamic_update(a, index, upd, axes=[0], sizes=[size], no_overlap=True), ea, True
        if name == "subsample":
            if a.rank == 0:
                return ops.abs(a), ea, True
            strides = [1 + (p >> (2 * d)) % 3 for d in range(a.rank)]
            return ops.subsample(a, strides), ea, True
        if name == "split_first":
            if a.rank == 0 or a.shape[p % a.rank] < 2:
                return ops.negate(a), ea, True
            axis = p % a.rank
            n = a.shape[axis]
            cut = 1 + p % (n - 1)
            return ops.split(a, [cut, n - cut], axis=axis)[p % 2], ea, True
        if name == "where":
            b2 = self.fit(a, b)
            cond = ops.greater(a, b2)
            if not (ea and eb):  # a tiny error flips the condition
                cond = ops.greater(a, ops.add(a, self.const(0.5 if fl else 1)))
            return ops.where(cond, a, b2), ea and eb and b2 is b, True
        if name == "cumsum":
            if a.rank == 0:
                return ops.negate(a), ea, True
            return ops.cumsum(a, dim=p % a.rank), not fl and ea, True
        if name == "topk":
            if a.rank == 0 or not ea:
                return ops.negate(a), ea, True
            axis = p % a.rank
            k = 1 + p % a.shape[axis]
            return ops.topk(a, k, axis=axis, largest=bool(p % 2), sorted=True)[0], ea, True
        if name == "argmax_cast":
            if a.rank == 0 or not ea:
                return ops.negate(a), ea, True
            f = ops.argmax if p % 2 else ops.argmin
            return ops.cast(f(a, dim=p % a.rank, keepdim=bool(p // 2 % 2)), self.dtype), True, True
        if name == "clip":
            return ops.clip(a, -1.0 + (p % 5) / 10, 0.5 + (p % 7) / 10), ea, True
        if name == "group_norm":
            if a.rank < 2:
                return ops.tanh(a), False, True
            c = a.shape[1]
            groups = [g for g in range(1, c + 1) if c % g == 0][p % sum(1 for g in range(1, c + 1) if c % g == 0)]
            w = self.const(np.random.default_rng(p).uniform(0.5, 1.5, size=(c,)))
            bias = self.const(np.random.default_rng(p + 1).uniform(-1, 1, size=(c,)))
            y = ops.group_norm(a, w, bias, num_groups=groups)
            return (y[0] if isinstance(y, tuple) else y), False, True
        if name == "scatter":
            if a.rank == 0:
                return ops.tanh(a), False, True
            rows = a.shape[0]
            k = 1 + p % rows
            idx = np.random.default_rng(p).permutation(rows)[:k]  # distinct: scatter order is unspecified
            ind = np.broadcast_to(idx.reshape((k,) + (1,) * (a.rank - 1)), (k,) + a.shape[1:]).astype(np.int32)
            vals = self.const(np.random.default_rng(p + 2).uniform(-1, 1, size=ind.shape))
            return ops.scatter(a, popxl.constant(np.ascontiguousarray(ind)), vals, axis=0), ea, True
        if name in ("conv", "pool"):
            # (N, C, *spatial) with 1 or 2 spatial axes: a rank-3 or rank-4 view of the tensor
            if a.rank < 3 or a.rank > 4:
                return ops.tanh(a), False, True
            sp = a.shape[2:]
            k = [1 + (p >> d) % min(3, n) for d, n in enumerate(sp)]
            stride = [1 + (p >> (d + 3)) % 2 for d in range(len(sp))]
            # at most half the kernel (as torch asks): every window holds a real element
            pads = [min((p >> (d + 5)) % 2, k[d % len(sp)] // 2) for d in range(2 * len(sp))]
            if name == "pool":
                f = ops.max_pool if p % 2 else ops.average_pool
                return f(a, kernel_size=tuple(k), stride=tuple(stride), padding=tuple(pads)), False, True
            c = a.shape[1]
            groups = 1 if c % 2 else 1 + (p >> 9) % 2
            m = groups * (1 + p % 3)
            w = self.const(np.random.default_rng(p).uniform(-1, 1, size=(m, c // groups, *k)))
            return ops.conv(a, w, stride=tuple(stride), padding=tuple(pads), dilation=tuple([1] * len(sp)),
                            groups=groups), False, True
        if name == "reduce_more":
            if a.rank == 0:
                return ops.tanh(a), False, True
            axis = p % a.rank
            kind = ["logsumexp", "l2", "l1", "prod", "sumsquare", "logsum_abs"][p % 6]
            if kind == "logsum_abs":
                return ops.logsum(ops.abs(a) + 0.5, axis=axis), False, True
            if kind == "prod":
                return ops.prod(ops.tanh(a), axis=axis), False, True
            return getattr(ops, kind)(a, axis=axis), False, True
        if name == "pow_fmod":
            b2 = self.fit(a, b)
            if p % 2:
                return ops.pow(ops.abs(a) + 0.5, ops.tanh(b2)), False, True
            return ops.fmod(a, ops.abs(b2) + 0.5), False, True
        if name == "view_add_":
            # an in-place add through a view (slice_ / transpose_ / reshape_): the base changes
            if not self.fresh[ia] or a.rank == 0:
                return ops.negate(a), ea, True
            kind = p % 3
            if kind == 0 and a.shape[0] > 1:
                v = ops.slice_(a, start=[a.shape[0] // 2], stop=[a.shape[0]], axis=[0])
            elif kind == 1:
                v = ops.transpose_(a)
            else:
                v = ops.reshape_(a, (int(np.prod(a.shape)),))
            b2 = self.fit(v, b)
            ops.add_(v, b2)
            self.exact[ia] = ea and eb and b2 is b
            return None, None, None
        if name in INPLACE:
            if not self.fresh[ia]:  # only ops' own results: not inputs, variables or views
                return ops.negate(a), ea, True
            if name == "relu_":
                if not fl:
                    return ops.abs(a), ea, True
                ops.relu_(a)
                self.exact[ia] = ea
                return None, None, None
            b2 = self.fit(a, b)
            if name == "scaled_add_" and fl:
                ops.scaled_add_(a, b2, 0.5, 0.25)
                self.exact[ia] = False
            else:
                ops.add_(a, b2)
                self.exact[ia] = ea and eb and b2 is b
            return None, None, None
        raise AssertionError(name)


def _body(desc, inputs, ops_list, exact=True):
    pool = list(inputs)
    b = _Builder(desc, pool, [exact] * len(pool), [False] * len(pool))
    for op in ops_list:
        b.step(op)
    return b


def _carry(first, last):
    """The loop-carried value of a repeat body: first's shape and float dtype, bounded over
    iterations, depending on the body's last tensor."""
    m = ops.mean(ops.cast(last, popxl.float32)) if last.dtype != popxl.float32 else ops.mean(last)
    if first.dtype != popxl.float32:
        m = ops.cast(m, first.dtype)
    return ops.tanh(ops.add(first, m))


def build(desc) -> Built:
    """The Ir of a description."""
    dtype = DTYPES[desc["dtype"]]
    data = input_data(desc)
    ir = popxl.Ir()
    outputs = []
    variable = None
    with ir.main_graph:
        streams = [popxl.h2d_stream(x.shape, dtype, name=f"in{k}") for k, x in enumerate(data)]
        loaded = [ops.host_load(s) for s in streams]
        wrap = desc["wrap"]
        if wrap == "none":
            b = _body(desc, loaded, desc["ops"])
            results = b.pool
        else:
            specs = [popxl.TensorSpec(x.shape, dtype) for x in data]

            def fn(*ins):
                # a repeat body's carried input is computed after the first iteration: not exact
                bb = _body(desc, list(ins), desc["ops"], exact=wrap == "call")
                if wrap == "call":
                    picks = sorted({k % len(bb.pool) for k in desc["outputs"]} | {len(bb.pool) - 1})
                    return tuple(ops.identity(bb.pool[k]) if bb.pool[k] in ins else bb.pool[k] for k in picks)
                return (_carry(ins[0], bb.pool[-1]),)

            g = ir.create_graph(fn, *specs)
            if wrap == "call":
                results = list(ops.call(g, *loaded))
                if desc["twice"]:  # the same graph called again (its code is shared)
                    results += list(ops.call(g, *loaded))
            else:
                results = list(ops.repeat(g, desc["repeat"], *loaded))[:1]
        picks = sorted({k % len(results) for k in desc["outputs"]} | {len(results) - 1})
        for n, k in enumerate(picks):
            t = results[k]
            o = popxl.d2h_stream(t.shape, t.dtype, name=f"out{n}")
            ops.host_store(o, t)
            outputs.append(o)
        if desc["variable"] and wrap == "none":
            variable = popxl.variable(np.zeros(data[0].shape, dtype.as_numpy()), dtype, name="acc")
            ops.add_(variable, loaded[0]) if dtype == popxl.int32 else ops.scaled_add_(variable, loaded[0], 1.0, 2.0)
    return Built(ir, streams, outputs, variable, data)


# -- the reference ---------------------------------------------------------------------------------

def reference(built: Built):
    """(outputs by stream, final variable value) from popxl.reference, the NumPy interpreter of the
    same Ir (one run, as Session.run)."""
    interp = _ref.Interpreter(built.ir)
    out = interp.run(dict(zip(built.streams, built.inputs)))
    var = interp.get_tensor_data(built.variable) if built.variable is not None else None
    return out, var


def tolerance(dtype: str, ref: np.ndarray) -> dict:
    scale = float(np.max(np.abs(ref[np.isfinite(ref)]), initial=1.0)) if ref.dtype.kind == "f" else 1.0
    if dtype == "float16" or ref.dtype == np.float16:
        return {"rtol": 2e-2, "atol": 2e-2 * max(scale, 1.0)}
    if ref.dtype.kind == "f":
        return {"rtol": 2e-4, "atol": 2e-5 * max(scale, 1.0)}
    return {"rtol": 0, "atol": 0}
