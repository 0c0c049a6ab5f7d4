"""Run a replicated popxl program on per-replica data and return per-replica NumPy outputs."""
import numpy as np

import popxl
import popxl.ops as ops


def run_replicated(replicas, build, inputs, device="ipu_model", reference=True):
    """build(ir, *tensors) -> dict name -> tensor, built in the main graph of an Ir with
    `replicas` replicas; inputs: arrays with a leading replica axis (one slice per replica).
    Returns ({name: array (replicas, ...)}, session). The outputs must also match popxl.reference's
    (its replicas meet at the collectives)."""
    ir = popxl.Ir(replication=replicas)
    with ir.main_graph:
        streams, tensors = [], []
        for i, arr in enumerate(inputs):
            arr = np.asarray(arr)
            s = popxl.h2d_stream(arr.shape[1:], popxl.dtype.as_dtype(arr.dtype), name=f"in{i}")
            streams.append(s)
            tensors.append(ops.host_load(s, f"x{i}"))
        outs = build(ir, *tensors)
        d2h = {}
        for name, o in outs.items():
            s = popxl.d2h_stream(o.shape, o.dtype, name=f"out_{name}")
            ops.host_store(s, o)
            d2h[name] = s
    session = popxl.Session(ir, device)
    with session:
        res = session.run({s: np.asarray(a) for s, a in zip(streams, inputs)})
    out = {k: (res[s] if replicas > 1 else res[s][None]) for k, s in d2h.items()}
    if reference:
        from helpers import assert_matches_reference

        from popxl import reference as popxl_reference

        ref = popxl_reference.run(ir, {s: np.asarray(a) for s, a in zip(streams, inputs)})
        for k, s in d2h.items():
            assert_matches_reference(res[s], ref[s], f"output {k!r}")
    return out, session


def groups_of(assignment):
    groups = {}
    for r, g in enumerate(assignment):
        groups.setdefault(g, []).append(r)
    return [groups[g] for g in sorted(groups)]
