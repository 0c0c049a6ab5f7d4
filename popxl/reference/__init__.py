"""popxl.reference: a NumPy interpreter of popxl graphs, independent of the lowering.

``evaluate(graph, inputs, upcast=False)`` runs ``graph`` on NumPy arrays (one per graph input) and
returns the dict {tensor: array} of every tensor it computed. With ``upcast`` float32/float16 are
computed in float64 (for finite differences). Only the op types the transform tests use are here.
"""
import math

import numpy as np

from popxl.tensor import Constant


def _np_dtype(t, upcast):
    dt = t.dtype.as_numpy()
    if upcast and np.issubdtype(dt, np.floating):
        return np.float64
    return dt


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


UNARY = {
    "abs": np.abs, "ceil": np.ceil, "cos": np.cos, "exp": np.exp, "floor": np.floor, "log": np.log,
    "negate": np.negative, "relu": lambda x: np.maximum(x, 0), "sign": np.sign, "sin": np.sin, "sqrt": np.sqrt,
    "tanh": np.tanh, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "logical_not": np.logical_not,
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "geluerf": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "swish": lambda x: x / (1 + np.exp(-x)),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "pow": np.power, "fmod": np.fmod,
    "equal": np.equal, "greater": np.greater, "logical_and": np.logical_and, "logical_or": np.logical_or,
}
REDUCE = {
    "sum": lambda x, a, k: np.sum(x, a, keepdims=k), "mean": lambda x, a, k: np.mean(x, a, keepdims=k),
    "max": lambda x, a, k: np.max(x, a, keepdims=k), "min": lambda x, a, k: np.min(x, a, keepdims=k),
    "prod": lambda x, a, k: np.prod(x, a, keepdims=k),
    "logsum": lambda x, a, k: np.log(np.sum(x, a, keepdims=k)),
    "logsumexp": lambda x, a, k: np.log(np.sum(np.exp(x), a, keepdims=k)),
    "l1": lambda x, a, k: np.sum(np.abs(x), a, keepdims=k),
    "l2": lambda x, a, k: np.sqrt(np.sum(x * x, a, keepdims=k)),
    "sumsquare": lambda x, a, k: np.sum(x * x, a, keepdims=k),
}


def dropout_mask(seed, shape, ratio):
    rng = np.random.default_rng([int(s) for s in np.asarray(seed).ravel()])
    return rng.random(shape) >= ratio


def _conv(x, w, strides, pads, dilations, groups):
    n, c = x.shape[:2]
    m = w.shape[0]
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    kernel = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    out = np.zeros((n, m) + tuple(out_sp), dtype=np.result_type(x, w))
    cg, mg = c // groups, m // groups
    for g in range(groups):
        for kidx in np.ndindex(*kernel):
            sl = [slice(None), slice(g * cg, (g + 1) * cg)]
            for i in range(nd):
                start = kidx[i] * dilations[i]
                sl.append(slice(start, start + strides[i] * (out_sp[i] - 1) + 1, strides[i]))
            patch = xp[tuple(sl)]  # (n, cg, *out)
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + kidx]  # (mg, cg)
            out[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wk)
    return out


def _conv_transpose(x, w, strides, pads, dilations, groups, out_shape):
    """The adjoint of _conv: x (N, M, *O), w (M, C/groups, *K) -> (N, C, *out_shape)."""
    n, m = x.shape[:2]
    nd = x.ndim - 2
    kernel = w.shape[2:]
    c = w.shape[1] * groups
    full = [out_shape[i] + pads[i] + pads[nd + i] for i in range(nd)]
    out = np.zeros((n, c) + tuple(full), dtype=np.result_type(x, w))
    cg, mg = c // groups, m // groups
    osp = x.shape[2:]
    for g in range(groups):
        for kidx in np.ndindex(*kernel):
            sl = [slice(None), slice(g * cg, (g + 1) * cg)]
            for i in range(nd):
                start = kidx[i] * dilations[i]
                sl.append(slice(start, start + strides[i] * (osp[i] - 1) + 1, strides[i]))
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + kidx]  # (mg, cg)
            out[tuple(sl)] += np.einsum("nm...,mc->nc...", x[:, g * mg:(g + 1) * mg], wk)
    sl = [slice(None), slice(None)] + [slice(pads[i], pads[i] + out_shape[i]) for i in range(nd)]
    return out[tuple(sl)]


def _pool(kind, x, a):
    kernel, strides, dilations, pads = a["kernel_size"], a["strides"], a["dilations"], a["pads"]
    nd = len(kernel)
    n_out = []
    for i in range(nd):
        span = x.shape[2 + i] + pads[i] + pads[nd + i] - dilations[i] * (kernel[i] - 1) - 1
        n_out.append((-(-span // strides[i]) if a["ceil_mode"] else span // strides[i]) + 1)
    out = np.zeros(x.shape[:2] + tuple(n_out), x.dtype)
    for o in np.ndindex(*n_out):
        vals = []
        for kidx in np.ndindex(*kernel):
            pos = [o[i] * strides[i] - pads[i] + kidx[i] * dilations[i] for i in range(nd)]
            if all(0 <= p < x.shape[2 + i] for i, p in enumerate(pos)):
                vals.append(x[(slice(None), slice(None)) + tuple(pos)])
        vals = np.stack(vals, -1)
        out[(slice(None), slice(None)) + o] = vals.max(-1) if kind == "max_pool" else vals.mean(-1)
    return out


def evaluate(graph, inputs, upcast=False, env=None):
    env = {} if env is None else env
    for t, v in zip(graph.inputs, inputs):
        env[t] = np.asarray(v).astype(_np_dtype(t, upcast))
    for t in graph.tensors:
        if isinstance(t, Constant):
            env[t] = np.asarray(t._data).astype(_np_dtype(t, upcast))
    for op in sorted(graph.ops, key=lambda o: o.id):
        ins = [env[t] for t in op.inputs]
        outs = _run(op, ins, upcast)
        for t, v in zip(op.outputs, outs):
            v = np.asarray(v)
            if v.shape != t.shape:
                v = np.broadcast_to(v, t.shape) if v.size == 1 else v.reshape(t.shape)
            env[t] = np.array(v, dtype=_np_dtype(t, upcast))
        for i in op.modified:  # in-place ops write their input
            if op.aliases.get(0) == i and op.outputs:
                env[op.inputs[i]] = env[op.outputs[0]]
    return env


def run_graph(graph, inputs, upcast=False):
    env = evaluate(graph, inputs, upcast)
    return [env[t] for t in graph.outputs]


def _run(op, ins, upcast):
    a = op.attrs
    t = op.type
    if t in UNARY:
        return [UNARY[t](ins[0])]
    if t in BINARY:
        return [BINARY[t](ins[0], ins[1])]
    if t == "div":
        if np.issubdtype(ins[0].dtype, np.integer):
            return [ins[0] // ins[1]]
        return [ins[0] / ins[1]]
    if t == "maximum":
        return [np.maximum.reduce(np.broadcast_arrays(*ins))]
    if t == "where":
        return [np.where(ins[0], ins[1], ins[2])]
    if t == "clip":
        return [np.clip(ins[0], a["min"], a["max"])]
    if t == "scaled_add":
        names = list(a["input_names"])
        sa = a["a"] if a["a"] is not None else ins[names.index("a")].reshape(())
        sb = a["b"] if a["b"] is not None else ins[names.index("b")].reshape(())
        return [sa * ins[0] + sb * ins[1]]
    if t == "cast":
        return [ins[0].astype(_np_dtype(op.outputs[0], upcast))]
    if t in ("identity", "detach", "io_tile_copy", "print_tensor"):
        return [ins[0]]
    if t == "init":
        return [np.zeros(op.outputs[0].shape, _np_dtype(op.outputs[0], upcast))]
    if t in REDUCE:
        return [REDUCE[t](ins[0], tuple(a["axes"]), a["keepdims"])]
    if t == "median":
        x, axes = ins[0], tuple(a["axes"])
        kept = [i for i in range(x.ndim) if i not in axes]
        xt = np.transpose(x, kept + list(axes))
        rows = xt.reshape(int(np.prod([x.shape[i] for i in kept], dtype=np.int64)), -1)
        idx = np.argsort(rows, axis=1, kind="stable")[:, (rows.shape[1] - 1) // 2]
        vals = rows[np.arange(rows.shape[0]), idx]
        shape = op.outputs[0].shape
        return [vals.reshape(shape), idx.astype(np.int32).reshape(shape)]
    if t == "lamb_square":
        return [np.sum(ins[0].astype(np.float64) ** 2)]
    if t == "cumsum":
        return [np.cumsum(ins[0], a["axis"])]
    if t in ("argmax", "argmin"):
        f = np.argmax if t == "argmax" else np.argmin
        return [f(ins[0], a["axis"], keepdims=a["keepdims"])]
    if t == "topk":
        x, k, ax = ins[0], a["k"], a["axis"]
        order = np.argsort(-x if a["largest"] else x, axis=ax, kind="stable")
        idx = np.take(order, np.arange(k), axis=ax)
        return [np.take_along_axis(x, idx, ax), idx.astype(np.int32)]
    if t == "reshape":
        return [ins[0].reshape(a["shape"])]
    if t == "transpose":
        return [np.transpose(ins[0], a["permutation"])]
    if t == "slice":
        return [ins[0][tuple(a["index"])]]
    if t == "subsample":
        return [ins[0][tuple(slice(None, None, s) for s in a["strides"])]]
    if t == "concat":
        return [np.concatenate(ins, a["axis"])]
    if t == "split":
        cuts = np.cumsum(a["splits"])[:-1]
        return np.split(ins[0], cuts, a["axis"])
    if t in ("gather", "tied_gather"):
        return [np.take(ins[0], ins[1].astype(np.int64), axis=a["axis"])]
    if t == "scatter":
        out = ins[0].copy()
        np.put_along_axis(out, ins[1].astype(np.int64), ins[2], a["axis"])
        return [out]
    if t == "interpolate":
        from popxl.ops._interpolation import reference
        return [reference(ins[0], op.outputs[0].shape, a)]
    if t == "roi_align":
        from codelets.roi_align import reference
        return [reference(ins[0], ins[1], ins[2], a["output_size"], a["spatial_scale"],
                          a["sampling_ratio"]).astype(ins[0].dtype)]
    if t == "roi_align_grad":
        from codelets.roi_align import RoiAlignGrad
        return [RoiAlignGrad().reference(ins[0], op.outputs[0].shape, ins[1], ins[2], a["output_size"],
                                         a["spatial_scale"], a["sampling_ratio"]).astype(ins[0].dtype)]
    if t == "grouped_gather":
        ax = a["axis"]
        return [np.stack([np.take(ins[0][g], ins[1][g].astype(np.int64), axis=ax - 1)
                          for g in range(a["group_size"])])]
    if t in ("scatter_reduce", "grouped_scatter_reduce"):
        data, idx = ins[0], ins[1].astype(np.int64)
        ax = a["axis"]
        shape = list(data.shape)
        shape[ax] = a["axis_size"]
        out = ins[2].copy() if len(ins) > 2 else np.zeros(shape, data.dtype)
        if idx.shape != data.shape:
            shp = [1] * data.ndim
            shp[ax] = -1
            idx = np.broadcast_to(idx.reshape(shp), data.shape)
        it = np.nditer(idx, flags=["multi_index"])
        for v in it:
            pos = list(it.multi_index)
            pos[ax] = int(v)
            out[tuple(pos)] += data[it.multi_index]
        return [out]
    if t == "dynamic_slice":
        sl = [slice(None)] * ins[0].ndim
        for ax, size, off in zip(a["axes"], a["sizes"], ins[1]):
            sl[ax] = slice(int(off), int(off) + size)
        return [ins[0][tuple(sl)]]
    if t == "dynamic_update":
        out = ins[0].copy()
        sl = [slice(None)] * out.ndim
        for ax, size, off in zip(a["axes"], a["sizes"], ins[1]):
            sl[ax] = slice(int(off), int(off) + size)
        out[tuple(sl)] = ins[2]
        return [out]
    if t == "onehot":
        idx, vals = ins[0].astype(np.int64), ins[1]
        n = a["num_classes"]
        hot = np.moveaxis(idx[..., None] == np.arange(n), -1, a["axis"])
        return [np.where(hot, vals[1], vals[0])]
    if t == "matmul":
        return [np.matmul(ins[0], ins[1])]
    if t == "conv":
        return [_conv(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["groups"])]
    if t == "conv_transpose":
        return [_conv_transpose(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["groups"],
                                a["output_shape"])]
    if t in ("average_pool", "max_pool"):
        return [_pool(t, ins[0], a)]
    if t == "softmax":
        x = ins[0] - np.max(ins[0], a["axis"], keepdims=True)
        e = np.exp(x)
        return [e / np.sum(e, a["axis"], keepdims=True)]
    if t == "group_norm":
        x, w, b = ins
        n, c = x.shape[:2]
        g = a["num_groups"]
        x3 = x.reshape(n, g, -1)
        mean = x3.mean(-1)
        var = x3.var(-1)
        inv = 1 / np.sqrt(var + a["epsilon"])
        y = ((x3 - mean[..., None]) * inv[..., None]).reshape(x.shape)
        cs = (1, c) + (1,) * (x.ndim - 2)
        return [y * w.reshape(cs) + b.reshape(cs), mean.ravel(), inv.ravel()]
    if t == "batch_norm_inference":
        x, s, b, m, v = ins
        cs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        return [s.reshape(cs) * (x - m.reshape(cs)) / np.sqrt(v.reshape(cs) + a["epsilon"]) + b.reshape(cs)]
    if t in ("nll_loss", "nll_loss_with_softmax_grad"):
        probs, labels = ins[0], ins[1].astype(np.int64)
        ign = a.get("ignore_index")
        valid = np.ones(labels.shape, bool) if ign is None else labels != ign
        safe = np.where(valid, labels, 0)
        picked = np.take_along_axis(probs, safe[..., None], -1)[..., 0]
        per = -(picked if a.get("log_prob") else np.log(picked)) * valid
        red = a["reduction"]
        count = valid.sum()
        loss = per if red == "none" else (per.sum() if red == "sum" else per.sum() / count)
        if t == "nll_loss":
            return [loss]
        hot = safe[..., None] == np.arange(probs.shape[-1])
        scale = ins[2].reshape(()) / (count if red == "mean" else 1)
        dx = (probs - hot) * scale * valid[..., None]
        return [loss, dx]
    if t == "dropout":
        return [ins[0] * dropout_mask(ins[1], ins[0].shape, a["ratio"]) / (1 - a["ratio"])]
    if t == "call":
        g = a["graph"]
        vals = [None] * len(g.inputs)
        for gi, oi in a["input_map"].items():
            vals[gi] = ins[oi]
        return run_graph(g, vals, upcast)
    if t == "repeat":
        g = a["graph"]
        vals = [None] * len(g.inputs)
        for gi, oi in a["input_map"].items():
            vals[gi] = ins[oi]
        k = a["num_carried"]
        for _ in range(a["repeat_count"]):
            outs = run_graph(g, vals, upcast)
            vals[:k] = outs
        return vals[:k]
    if t == "conditional":
        key = "then" if bool(np.asarray(ins[0]).reshape(())) else "else"
        g = a[f"{key}_branch"]
        vals = [None] * len(g.inputs)
        for gi, oi in a[f"{key}_input_map"].items():
            vals[gi] = ins[oi]
        return run_graph(g, vals, upcast)
    raise NotImplementedError(f"popxl.reference: op type {t!r}")
