"""Programs the multi-instance tests run both under poprun (replication="popdist") and in one
process (replication=R), so the two can be compared bitwise and against NumPy.

Every builder takes the Ir's replication argument and the global replica count, and returns
(ir, feeds, outputs, after) where feeds(first, local) gives the session inputs of replicas
first .. first + local - 1, outputs names the d2h streams, and after(session) reads variables.
"""
from __future__ import annotations

import numpy as np

import popxl
import popxl.ops as ops

C = ops.collectives
REDUCE_OPS = ("add", "mean", "max", "min", "mul", "square_add")


def groupings(R: int) -> list:
    """(stride, group size) groupings over R replicas, None = all replicas."""
    out = [None]
    if R >= 4:
        out += [(1, 2), (2, 2), (1, 1)]
    return out


def data(R: int) -> dict:
    rng = np.random.default_rng(100 + R)
    return {"x": rng.normal(size=(R, 3, 5)).astype(np.float32),
            "xi": rng.integers(-50, 50, (R, 6)).astype(np.int32),
            "xh": rng.normal(size=(R, 8)).astype(np.float16),
            "xb": rng.random((R, 4)) > 0.5}


def _feeds(streams, arrays):
    def feeds(first, local):
        out = {}
        for s, a in zip(streams, arrays):
            part = a[first:first + local]
            out[s] = part if local > 1 else part[0]
        return out
    return feeds


def collectives(replication, R: int):
    """Every collective kind and reduction over every grouping, float32 / int32 / float16 / bool."""
    d = data(R)
    ir = popxl.Ir(replication=replication)
    outs = {}
    with ir.main_graph:
        streams, ts = [], []
        for k in ("x", "xi", "xh", "xb"):
            s = popxl.h2d_stream(d[k].shape[1:], popxl.dtype.as_dtype(d[k].dtype), name=k)
            streams.append(s)
            ts.append(ops.host_load(s, k))
        x, xi, xh, xb = ts
        for gi, spec in enumerate(groupings(R)):
            rg = None if spec is None else ir.replica_grouping(*spec)
            for op in REDUCE_OPS:
                outs[f"ar_{op}_{gi}"] = C.replicated_all_reduce(x, op, rg)
            outs[f"ag_{gi}"] = C.replicated_all_gather(x, 0, rg)
            outs[f"rs_add_{gi}"] = C.replicated_reduce_scatter(x, "add", rg)
            outs[f"rs_max_{gi}"] = C.replicated_reduce_scatter(x, "max", rg)
            outs[f"sl_{gi}"] = C.replica_sharded_slice(x, rg)
            outs[f"int_add_{gi}"] = C.replicated_all_reduce(xi, "add", rg)
            outs[f"half_add_{gi}"] = C.replicated_all_reduce(xh, "add", rg)
            outs[f"and_{gi}"] = C.replicated_all_reduce(xb, "and", rg)
            outs[f"or_{gi}"] = C.replicated_all_reduce(xb, "or", rg)
        d2h = {}
        for name, o in outs.items():
            s = popxl.d2h_stream(o.shape, o.dtype, name=f"out_{name}")
            ops.host_store(s, o)
            d2h[name] = s
    return ir, _feeds(streams, [d["x"], d["xi"], d["xh"], d["xb"]]), d2h, lambda session: {}


def variables(replication, R: int):
    """Variables with replica groupings and retrieval modes, a replica-sharded variable and a
    remote variable, each changed by a per-replica input so every replica holds its own value."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(R, 6)).astype(np.float32)
    ir = popxl.Ir(replication=replication)
    vars_ = {}
    with ir.main_graph:
        s = popxl.h2d_stream((6,), popxl.float32, name="x")
        t = ops.host_load(s, "x")
        specs = {"all": None, "pairs": (1, 2), "strided": (2, 2)} if R >= 4 else {"all": None}
        for name, spec in specs.items():
            rg = None if spec is None else ir.replica_grouping(*spec)
            G = 1 if rg is None else rg.num_groups
            init = np.arange(G * 6, dtype=np.float32).reshape((G, 6) if G > 1 else (6,))
            for mode in ("one_per_group", "all_replicas"):
                v = popxl.variable(init, popxl.float32, name=f"{name}_{mode}", replica_grouping=rg,
                                   retrieval_mode=mode)
                ops.var_updates.accumulate_(v, t)
                vars_[f"{name}_{mode}"] = v
        # replica-sharded: every replica adds its input's first elements to its shard
        w, shard = popxl.replica_sharded_variable(np.arange(2 * R, dtype=np.float32).reshape(R, 2), popxl.float32,
                                                  name="rts")
        ops.var_updates.accumulate_(shard, ops.slice(t, start=[0], stop=[shard.shape[0]]))
        vars_["rts"] = w
        if R >= 4:  # sharded within groups {0, 2} and {1, 3} (stride 2): every group spans instances
            rg = ir.replica_grouping(stride=2, group_size=2)
            G = rg.num_groups
            w2, shard2 = popxl.replica_sharded_variable(np.arange(G * 6, dtype=np.float32).reshape(G, 6),
                                                        popxl.float32, name="rts_strided", replica_grouping=rg)
            ops.var_updates.accumulate_(shard2, ops.slice(t, start=[0], stop=[shard2.shape[0]]))
            vars_["rts_strided"] = w2
        # remote replica-sharded (the PopXL guide's manual remote buffer form): gathered, added to, stored
        rbuf = popxl.replica_sharded_buffer((2 * R,), popxl.float32)
        rrts = popxl.remote_replica_sharded_variable(np.arange(2 * R, dtype=np.float32), rbuf, 0, name="remote_rts")
        full = C.replicated_all_gather(ops.remote_load(rbuf, 0))
        ops.var_updates.accumulate_(full, ops.slice(ops.concat([t, t, t], 0), start=[0], stop=[2 * R]))
        ops.remote_store(rbuf, 0, C.replica_sharded_slice(full))
        vars_["remote_rts"] = rrts
        # remote: loaded, changed, stored back
        buf = popxl.remote_buffer((6,), popxl.float32, 1)
        rv = popxl.remote_variable(np.full(6, 2.0, np.float32), buf, 0, name="remote")
        loaded = ops.remote_load(buf, 0)
        ops.remote_store(buf, 0, loaded * t)
        vars_["remote"] = rv

    def after(session):
        got = {k: session.get_tensor_data(v) for k, v in vars_.items()}
        # PopXL's Session refuses to write "all_replicas" variables of groups of several replicas
        new = {k: np.full(v.shape_on_host, 0.25 if k == "rts" else 0.5, np.float32) for k, v in vars_.items()
               if not (v.retrieval_mode == "all_replicas" and v.replica_grouping.group_size > 1)}
        session.write_variables_data({vars_[k]: a for k, a in new.items()})
        got.update({f"{k}_written": session.get_tensor_data(vars_[k]) for k in new})
        return got
    return ir, _feeds([s], [x]), {}, after


PROGRAMS = {"collectives": collectives, "variables": variables}


def run(program: str, replication, R: int, first: int = 0, local: int | None = None, device: str = "cpu",
        stats: dict | None = None):
    """(outputs of this process's replicas {name: (local, ...)}, variables read after the run);
    `stats` receives the run's simulated cycles, in total and in collectives."""
    local = R if local is None else local
    ir, feeds, d2h, after = PROGRAMS[program](replication, R)
    with popxl.Session(ir, device) as session:
        res = session.run(feeds(first, local))
        if stats is not None:  # before `after`, whose reads and writes are no part of the run
            stats.update(total_cycles=session.total_cycles, collective_cycles=session.collective_cycles())
        got = after(session)
    outs = {k: (res[s] if local > 1 else res[s][None]) for k, s in d2h.items()}
    return outs, got
