"""Recurrent ONNX ops (LSTM, GRU, RNN): each a popxl `repeat` over the time steps, a loop on the
device as PopART's recurrent ops are, with autodiff through the loop."""
from __future__ import annotations

import numpy as np

import popxl
import popxl.ops as ops

from .context import onnx_op


# -- LSTM ------------------------------------------------------------------------------------------------

@onnx_op("LSTM", attrs=("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                        "input_forget", "layout"))
def lstm(node):
    """ONNX LSTM (gates i, o, f, c): a popxl `repeat` over the sequence (a loop on the device, as
    PopART's LSTM is), each iteration slicing its time step with dynamic_slice and writing its
    output with dynamic_update; autodiff goes through the loop."""
    x, w, r = node.input(0), node.input(1), node.input(2)
    if node.has_input(4):
        raise node.error("sequence_lens is not supported (all sequences run their full length)")
    if node.has_input(7):
        raise node.error("peephole weights (input P) are not supported")
    acts = node.attr("activations")
    if acts and [a.decode() if isinstance(a, bytes) else a for a in acts] not in (["Sigmoid", "Tanh", "Tanh"],
                                                                                 ["Sigmoid", "Tanh", "Tanh"] * 2):
        raise node.error(f"activations {acts} are not supported (only the default Sigmoid, Tanh, Tanh)")
    if node.attr("clip") is not None or int(node.attr("input_forget", 0) or 0) or int(node.attr("layout", 0) or 0):
        raise node.error("clip, input_forget and layout=1 are not supported")
    direction = node.attr("direction", "forward") or "forward"
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    seq, batch, _ = x.shape
    hidden = int(node.attr("hidden_size") or r.shape[-1])
    dt = x.dtype
    ys, hs, cs = [], [], []
    for d, kind in enumerate(dirs):
        wd = ops.transpose(ops.squeeze(ops.slice(w, start=[d], stop=[d + 1], axis=[0]), [0]))  # (in, 4H)
        rd = ops.transpose(ops.squeeze(ops.slice(r, start=[d], stop=[d + 1], axis=[0]), [0]))  # (H, 4H)
        if node.has_input(3):
            bd = ops.squeeze(ops.slice(node.input(3), start=[d], stop=[d + 1], axis=[0]), [0])
            bias = ops.add(ops.slice(bd, start=[0], stop=[4 * hidden], axis=[0]),
                           ops.slice(bd, start=[4 * hidden], stop=[8 * hidden], axis=[0]))
        else:
            bias = popxl.constant(np.zeros(4 * hidden, dt.as_numpy()), name="lstm_zero_bias")

        def initial(i):
            if node.has_input(i):
                return ops.squeeze(ops.slice(node.input(i), start=[d], stop=[d + 1], axis=[0]), [0])
            return popxl.constant(np.zeros((batch, hidden), dt.as_numpy()), name="lstm_zero_state")

        def step(t, h, c, y, xs, wx, wh, b, reverse=kind == "reverse"):
            idx = ops.sub(popxl.constant(np.array([seq - 1], np.int32)), t) if reverse else t
            xt = ops.reshape(ops.dynamic_slice(xs, idx, [0], [1], True), (batch, xs.shape[2]))
            g = ops.add(ops.add(ops.matmul(xt, wx), ops.matmul(h, wh)), b)
            gi, go, gf, gc = ops.split(g, 4, axis=1)
            c = ops.add(ops.mul(ops.sigmoid(gf), c), ops.mul(ops.sigmoid(gi), ops.tanh(gc)))
            h = ops.mul(ops.sigmoid(go), ops.tanh(c))
            y = ops.dynamic_update(y, idx, ops.reshape(h, (1, batch, hidden)), [0], [1], True)
            return ops.add(t, popxl.constant(np.array([1], np.int32))), h, c, y

        spec = popxl.TensorSpec
        graph = popxl.gcg().ir.create_graph(step, spec((1,), popxl.int32), spec((batch, hidden), dt),
                                            spec((batch, hidden), dt), spec((seq, batch, hidden), dt), x, wd, rd,
                                            bias)
        t0 = popxl.constant(np.zeros(1, np.int32), name="lstm_t0")
        y0 = popxl.constant(np.zeros((seq, batch, hidden), dt.as_numpy()), name="lstm_y0")
        _, h, c, y = ops.repeat(graph, seq, t0, initial(5), initial(6), y0, x, wd, rd, bias)
        ys.append(ops.reshape(y, (seq, 1, batch, hidden)))
        hs.append(ops.reshape(h, (1, batch, hidden)))
        cs.append(ops.reshape(c, (1, batch, hidden)))
    y = ops.concat(ys, 1) if len(ys) > 1 else ys[0]
    yh = ops.concat(hs, 0) if len(hs) > 1 else hs[0]
    yc = ops.concat(cs, 0) if len(cs) > 1 else cs[0]
    return [y, yh, yc][:max(1, node.num_outputs)]


# -- GRU, RNN --------------------------------------------------------------------------------------------

_ACTIVATIONS = {"Tanh": ops.tanh, "Sigmoid": ops.sigmoid, "Relu": ops.relu}


def _recurrence(node, n_gates: int, cell):
    """An ONNX recurrent op (GRU, RNN) as a popxl `repeat` over the time steps, as the LSTM rule
    builds it: each iteration slices its step with dynamic_slice, runs `cell(xt, h, wx, wh, wb, rb)`
    (wx (in, G H), wh (H, G H), the biases (G H,)) and writes its output with dynamic_update.
    Returns [Y (seq, directions, batch, H), Y_h (directions, batch, H)] cut to the node's outputs."""
    x, w, r = node.input(0), node.input(1), node.input(2)
    if node.has_input(4):
        raise node.error("sequence_lens is not supported (all sequences run their full length)")
    if node.attr("clip") is not None or int(node.attr("layout", 0) or 0):
        raise node.error("clip and layout=1 are not supported")
    direction = node.attr("direction", "forward") or "forward"
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    seq, batch, _ = x.shape
    hidden = int(node.attr("hidden_size") or r.shape[-1])
    gh = n_gates * hidden
    dt = x.dtype
    ys, hs = [], []
    for d, kind in enumerate(dirs):
        def one(t, i):
            return ops.squeeze(ops.slice(t, start=[i], stop=[i + 1], axis=[0]), [0])
        wd, rd = ops.transpose(one(w, d)), ops.transpose(one(r, d))  # (in, G H), (H, G H)
        if node.has_input(3):
            bd = one(node.input(3), d)
            wb = ops.slice(bd, start=[0], stop=[gh], axis=[0])
            rb = ops.slice(bd, start=[gh], stop=[2 * gh], axis=[0])
        else:
            wb = rb = popxl.constant(np.zeros(gh, dt.as_numpy()), name="rnn_zero_bias")
        h0 = one(node.input(5), d) if node.has_input(5) else popxl.constant(np.zeros((batch, hidden), dt.as_numpy()),
                                                                           name="rnn_zero_state")

        def step(t, h, y, xs, wx, wh, bx, bh, reverse=kind == "reverse", d=d):
            idx = ops.sub(popxl.constant(np.array([seq - 1], np.int32)), t) if reverse else t
            xt = ops.reshape(ops.dynamic_slice(xs, idx, [0], [1], True), (batch, xs.shape[2]))
            h = cell(xt, h, wx, wh, bx, bh, d)
            y = ops.dynamic_update(y, idx, ops.reshape(h, (1, batch, hidden)), [0], [1], True)
            return ops.add(t, popxl.constant(np.array([1], np.int32))), h, y

        spec = popxl.TensorSpec
        graph = popxl.gcg().ir.create_graph(step, spec((1,), popxl.int32), spec((batch, hidden), dt),
                                            spec((seq, batch, hidden), dt), x, wd, rd, wb, rb)
        t0 = popxl.constant(np.zeros(1, np.int32), name="rnn_t0")
        y0 = popxl.constant(np.zeros((seq, batch, hidden), dt.as_numpy()), name="rnn_y0")
        _, h, y = ops.repeat(graph, seq, t0, h0, y0, x, wd, rd, wb, rb)
        ys.append(ops.reshape(y, (seq, 1, batch, hidden)))
        hs.append(ops.reshape(h, (1, batch, hidden)))
    y = ops.concat(ys, 1) if len(ys) > 1 else ys[0]
    yh = ops.concat(hs, 0) if len(hs) > 1 else hs[0]
    return [y, yh][:max(1, node.num_outputs)]


def _activations(node, default):
    acts = node.attr("activations") if node.has_attr("activations") else None  # not the schema's default list
    acts = [a.decode() if isinstance(a, bytes) else a for a in acts] if acts else []
    n_dirs = 2 if (node.attr("direction", "forward") or "forward") == "bidirectional" else 1
    acts = acts or default * n_dirs
    if len(acts) == len(default) and n_dirs == 2:
        acts = acts * 2  # one set given for both directions
    if len(acts) != len(default) * n_dirs or any(a not in _ACTIVATIONS for a in acts):
        raise node.error(f"activations {acts} are not supported (one of {sorted(_ACTIVATIONS)} per function and "
                         f"direction, without alpha / beta)")
    if node.attr("activation_alpha") or node.attr("activation_beta"):
        raise node.error("activation_alpha / activation_beta are not supported")
    return [[_ACTIVATIONS[a] for a in acts[i:i + len(default)]] for i in range(0, len(acts), len(default))]


@onnx_op("GRU", attrs=("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                       "linear_before_reset", "layout"))
def gru(node):
    """ONNX GRU (gates z, r, h; PopART's GRUOp): z = f(x Wz + h Rz + b), r = f(x Wr + h Rr + b),
    h~ = g(x Wh + (r h) Rh + b) or, with linear_before_reset (PyTorch's GRU), g(x Wh + r (h Rh +
    Rbh) + Wbh); h' = (1 - z) h~ + z h."""
    acts = _activations(node, ["Sigmoid", "Tanh"])
    lbr = int(node.attr("linear_before_reset", 0) or 0)
    hidden = int(node.attr("hidden_size") or node.input(2).shape[-1])

    def cols(t, i, n=1):
        return ops.slice(t, start=[i * hidden], stop=[(i + n) * hidden], axis=[t.rank - 1])

    def cell(xt, h, wx, wh, bx, bh, d):
        f, g = acts[d]
        gx = ops.add(ops.matmul(xt, wx), bx)
        if lbr:
            gr = ops.add(ops.matmul(h, wh), bh)
            z, r = f(ops.add(cols(gx, 0), cols(gr, 0))), f(ops.add(cols(gx, 1), cols(gr, 1)))
            ht = g(ops.add(cols(gx, 2), ops.mul(r, cols(gr, 2))))
        else:
            gr = ops.add(ops.matmul(h, cols(wh, 0, 2)), cols(bh, 0, 2))
            z, r = f(ops.add(cols(gx, 0), cols(gr, 0))), f(ops.add(cols(gx, 1), cols(gr, 1)))
            ht = g(ops.add(cols(gx, 2), ops.add(ops.matmul(ops.mul(r, h), cols(wh, 2)), cols(bh, 2))))
        return ops.add(ht, ops.mul(z, ops.sub(h, ht)))  # (1 - z) h~ + z h

    return _recurrence(node, 3, cell)


@onnx_op("RNN", attrs=("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                       "layout"))
def rnn(node):
    """ONNX RNN (PopART's RNNOp): h' = f(x Wi + h Ri + Wbi + Rbi), f Tanh by default."""
    acts = _activations(node, ["Tanh"])

    def cell(xt, h, wx, wh, bx, bh, d):
        return acts[d][0](ops.add(ops.add(ops.matmul(xt, wx), ops.matmul(h, wh)), ops.add(bx, bh)))

    return _recurrence(node, 1, cell)
