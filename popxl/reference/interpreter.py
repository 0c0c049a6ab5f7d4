"""The reference interpreter: runs popxl graphs op by op with each op type's NumPy rule.

Values are NumPy arrays. Memory semantics follow the IR: an in-place op writes into its input's
array (so every alias of it sees the change), a view op (``reshape_``, ``slice_``, ...) returns a
NumPy view of its input, a by-reference graph input is the caller's array and every other graph
input a copy, every other output a fresh array. (A view NumPy cannot express, such as a reshape of
a transposed view, is a copy.)

`Evaluator` runs one graph; `Interpreter` runs a whole Ir as a Session does: variables that live
across runs, host streams (the same leading (num_host_transfers, replication_factor) axes),
remote buffers, and `replication_factor` replicas that run in lock step (one thread each) and meet
at the collectives.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence

import numpy as np

from popxl.streams import DeviceToHostStream
from popxl.tensor import Constant, Variable

from .registry import get_reference_rule

__all__ = ["Evaluator", "Interpreter", "RuleContext", "ReferenceError", "Shared"]


class ReferenceError(RuntimeError):
    """The interpreter could not run an op (diverging replicas, a missing feed, ...)."""


class Shared:
    """An output a rule returns as this very array (storage it shares, such as a variable's),
    where outputs are otherwise fresh copies."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array


class RuleContext:
    """What a reference rule sees besides the op and its input values."""

    def __init__(self, evaluator: "Evaluator", op):
        self.evaluator = evaluator
        self.op = op
        self.upcast = evaluator.upcast
        self.machine = evaluator.machine
        self.writes: Dict[int, np.ndarray] = {}

    def dtype(self, t) -> np.dtype:
        """The NumPy dtype tensor `t` is computed in."""
        return self.evaluator.np_dtype(t)

    def out_dtype(self, i: int = 0) -> np.dtype:
        return self.evaluator.np_dtype(self.op.outputs[i])

    def write(self, i: int, value) -> None:
        """The new value of input i, which the op modifies."""
        if i not in self.op.modified:
            raise ReferenceError(f"{self.op}: input {i} is not modified by the op")
        self.writes[i] = value

    def run_graph(self, graph, values: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Run a called graph on these input arrays (passed as they are: copy the ones the callee
        must not change). Returns its outputs."""
        return self.evaluator.run_graph(graph, values, copy_inputs=False)


class Evaluator:
    """Runs graphs with the reference rules. `upcast` computes float16 / float32 in float64
    (finite differences); `machine` is the Interpreter replica state (None: variables hold their
    initial values and host or collective ops are refused)."""

    def __init__(self, upcast: bool = False, machine: Optional["_Replica"] = None):
        self.upcast = upcast
        self.machine = machine

    def np_dtype(self, t) -> np.dtype:
        dt = np.dtype(t.dtype.as_numpy())
        if self.upcast and dt.kind == "f":
            return np.dtype(np.float64)
        return dt

    def _value_of(self, t, env):
        if isinstance(t, Constant):
            return np.array(t._data, dtype=self.np_dtype(t))
        if isinstance(t, Variable):
            if self.machine is not None:
                return self.machine.variable(t)
            return np.array(t._data, dtype=self.np_dtype(t))
        raise ReferenceError(f"tensor {t.id!r} has no value: it is neither computed before its use nor an input")

    def evaluate(self, graph, inputs: Sequence, env: Optional[dict] = None, copy_inputs: bool = True) -> dict:
        """Run `graph` on one value per graph input; returns {tensor: array} of every tensor it
        computed (inputs, constants and variables included)."""
        env = {} if env is None else env
        if len(inputs) != len(graph.inputs):
            raise ReferenceError(f"{graph}: {len(graph.inputs)} inputs, {len(inputs)} values given")
        for t, v in zip(graph.inputs, inputs):
            dt = self.np_dtype(t)
            if v is None:
                raise ReferenceError(f"{graph}: no value for input {t.id!r}")
            if copy_inputs or not isinstance(v, np.ndarray) or v.dtype != dt:
                v = np.array(v, dtype=dt)
            env[t] = v.reshape(t.shape) if v.shape != tuple(t.shape) else v
        for op in sorted(graph.ops, key=lambda o: o.id):
            ins = []
            for t in op.inputs:
                if t not in env:
                    env[t] = self._value_of(t, env)
                ins.append(env[t])
            self._run_op(op, ins, env)
        for t in graph.tensors:
            if t not in env and isinstance(t, (Constant, Variable)):
                env[t] = self._value_of(t, env)
        return env

    def run_graph(self, graph, inputs: Sequence, copy_inputs: bool = True) -> List[np.ndarray]:
        env = self.evaluate(graph, inputs, copy_inputs=copy_inputs)
        out = []
        for t in graph.outputs:
            if t not in env:
                env[t] = self._value_of(t, env)
            out.append(env[t])
        return out

    def _run_op(self, op, ins, env) -> None:
        rule = get_reference_rule(op.type)
        ctx = RuleContext(self, op)
        outs = list(rule(ctx, op, ins))
        if len(outs) != len(op.outputs):
            raise ReferenceError(f"{op}: the reference rule gave {len(outs)} outputs, the op has {len(op.outputs)}")
        for i, v in ctx.writes.items():
            _assign(ins[i], v)
        for k, (t, v) in enumerate(zip(op.outputs, outs)):
            dt = self.np_dtype(t)
            if isinstance(v, Shared):
                env[t] = v.array
                continue
            src = op.aliases.get(k)
            if src is not None and src in op.modified:
                base = ins[src]
                if v is not base:
                    _assign(base, v)
                env[t] = base
                continue
            v = np.asarray(v)
            if src is not None and v.dtype == dt and v.shape == tuple(t.shape) and np.shares_memory(v, ins[src]):
                env[t] = v  # a view of its input
                continue
            if v.shape != tuple(t.shape):
                if v.size == 1:
                    v = np.broadcast_to(v.reshape(()), t.shape)
                elif v.size == int(np.prod(t.shape, dtype=np.int64)):
                    v = v.reshape(t.shape)
                else:
                    raise ReferenceError(f"{op}: the reference rule gave output {k} the shape {v.shape}, "
                                         f"the op records {tuple(t.shape)}")
            env[t] = np.array(v, dtype=dt)


def _assign(dst: np.ndarray, value) -> None:
    value = np.asarray(value)
    if value.shape != dst.shape:
        value = value.reshape(dst.shape) if value.size == dst.size else np.broadcast_to(value, dst.shape)
    np.copyto(dst, value.astype(dst.dtype, copy=False), casting="unsafe")


# ------------------------------------------------------------------------------------------------
# a whole Ir


class _Meeting:
    """Where the replicas of a run meet at every collective: each puts its value and gets every
    replica's value, in replica order."""

    def __init__(self, replicas: int, timeout: float = 60.0):
        self.replicas = replicas
        self.barrier = threading.Barrier(replicas, timeout=timeout) if replicas > 1 else None
        self.slots: list = [None] * replicas

    def exchange(self, replica: int, value) -> list:
        if self.barrier is None:
            return [value]
        self.slots[replica] = value
        try:
            self.barrier.wait()
            values = list(self.slots)
            self.barrier.wait()
        except threading.BrokenBarrierError:
            raise ReferenceError("the replicas did not all reach the same collective (a branch taken by some "
                                 "replicas only, or an error on another replica)") from None
        return values


class _Replica:
    """One replica's state during a run: its variables, remote buffers and stream positions."""

    def __init__(self, interp: "Interpreter", index: int, meeting: _Meeting, feeds: dict, outputs: dict):
        self.interp = interp
        self.index = index
        self.replicas = interp.replicas
        self.meeting = meeting
        self.feeds = feeds
        self.outputs = outputs
        self.positions: Dict[object, int] = {}

    def variable(self, var) -> np.ndarray:
        try:
            return self.interp._storage[self.index][var]
        except KeyError:
            raise ReferenceError(f"variable {var.id!r} is not a variable of the main graph of this Ir") from None

    def remote_buffer(self, rb) -> Dict[int, np.ndarray]:
        return self.interp._remote[self.index].setdefault(rb, {})

    def _slot(self, stream, arr, lead_t: int):
        k = self.positions.get(stream, 0)
        self.positions[stream] = k + 1
        r = self.index
        if self.replicas > 1:
            arr = arr[:, r] if lead_t > 1 else arr[r]
        return (arr[k % lead_t] if lead_t > 1 else arr), k

    def host_load(self, stream) -> np.ndarray:
        if stream not in self.feeds:
            raise ReferenceError(f"no input for stream {stream.tensor_id!r}: pass an array for it in `inputs`")
        value, _ = self._slot(stream, self.feeds[stream], self.interp.ir.num_host_transfers)
        return np.array(value, copy=True)

    def host_store(self, stream, value) -> None:
        T = self.interp.ir.num_host_transfers
        k = self.positions.get(stream, 0)
        self.positions[stream] = k + 1
        out = self.outputs[stream]
        idx = ((k % T,) if T > 1 else ()) + ((self.index,) if self.replicas > 1 else ())
        out[idx] = np.asarray(value).reshape(out.shape[len(idx):])

    def exchange(self, value) -> list:
        return self.meeting.exchange(self.index, value)


class Interpreter:
    """A popxl Ir run by the reference rules, with a Session's inputs, outputs and variables:

        interp = popxl.reference.Interpreter(ir)
        outputs = interp.run({h2d_stream: data})        # {d2h_stream: array}, as Session.run
        interp.get_tensor_data(variable)

    Variables keep their values between runs (their initial values at the start).
    """

    def __init__(self, ir, upcast: bool = False):
        from popxl import _replication

        self.ir = ir
        self.upcast = upcast
        self.replicas = max(1, int(ir.replication_factor))
        self._storage: List[dict] = [{} for _ in range(self.replicas)]
        self._remote: List[dict] = [{} for _ in range(self.replicas)]
        ev = Evaluator(upcast)
        for var in ir.main_graph.variables:
            values = _replication.device_values(var, np.asarray(var._data), self.replicas)
            rb = getattr(var, "_remote_buffer", None)
            for r in range(self.replicas):
                v = values[r] if isinstance(values, list) else values
                v = np.array(v, dtype=ev.np_dtype(var))
                if rb is not None:
                    self._remote[r].setdefault(rb, {})[int(var._remote_offset)] = v
                else:
                    self._storage[r][var] = v if getattr(var, "_rts_shard", None) is not None else v.reshape(var.shape)

    def _lead(self) -> tuple:
        lead = []
        if self.ir.num_host_transfers > 1:
            lead.append(self.ir.num_host_transfers)
        if self.replicas > 1:
            lead.append(self.replicas)
        return tuple(lead)

    def run(self, inputs: Optional[dict] = None) -> dict:
        """Run the main graph once; returns {DeviceToHostStream: array} (leading axes as Session.run)."""
        lead = self._lead()
        feeds = {}
        for s, data in (inputs or {}).items():
            arr = np.asarray(data)
            want = lead + tuple(s.shape)
            if arr.shape != want:
                if arr.size != int(np.prod(want, dtype=np.int64)):
                    raise ValueError(f"input for stream {s.tensor_id!r} has shape {arr.shape}, expected {want}")
                arr = arr.reshape(want)
            feeds[s] = arr.astype(s.dtype.as_numpy(), copy=False)
        outputs: Dict[DeviceToHostStream, np.ndarray] = {}  # what the host_store ops write
        for g in self.ir.graphs:
            for op in g.ops:
                if op.type == "host_store":
                    s = op.attrs["stream"]
                    outputs.setdefault(s, np.zeros(lead + tuple(s.shape), s.dtype.as_numpy()))
        meeting = _Meeting(self.replicas)

        def replica(r: int):
            machine = _Replica(self, r, meeting, feeds, outputs)
            try:
                Evaluator(self.upcast, machine).evaluate(self.ir.main_graph, [])
            except BaseException:
                if meeting.barrier is not None:
                    meeting.barrier.abort()
                raise

        if self.replicas == 1:
            replica(0)
        else:
            with ThreadPoolExecutor(self.replicas) as pool:
                futures = [pool.submit(replica, r) for r in range(self.replicas)]
                errors = [f.exception() for f in futures]
            first = next((e for e in errors if e is not None and not isinstance(e, ReferenceError)), None)
            first = first or next((e for e in errors if e is not None), None)
            if first is not None:
                raise first
        return outputs

    def get_tensor_data(self, var) -> np.ndarray:
        """The host value of a variable (per group / replica as Session.get_tensor_data gives it)."""
        from popxl import _replication

        rb = getattr(var, "_remote_buffer", None)
        if rb is not None:
            def read(r):
                return self._remote[r][rb][int(var._remote_offset)]
        else:
            def read(r):
                return self._storage[r][var]
        value = _replication.host_value(var, read, self.replicas)
        return _replication.retrieved(var, value, self.replicas)
