"""Run a popxl function through Session on a small simulated IPU and return NumPy outputs."""
import numpy as np

import popxl
import popxl.ops as ops


def run_popxl(build, inputs, target="small:6", device="ipu_model", monkeypatch=None):
    """build(*tensors) -> tensor or tuple of tensors, called inside the main graph with one
    host_load per input array. Returns the outputs as NumPy arrays (and the session)."""
    import os

    old = os.environ.get("IPU_SIM_TARGET")
    os.environ["IPU_SIM_TARGET"] = target
    try:
        ir = popxl.Ir()
        with ir.main_graph:
            streams, tensors = [], []
            for i, arr in enumerate(inputs):
                arr = np.asarray(arr)
                s = popxl.h2d_stream(arr.shape, popxl.dtype.as_dtype(arr.dtype), name=f"in{i}")
                streams.append(s)
                tensors.append(ops.host_load(s, f"x{i}"))
            outs = build(*tensors)
            single = not isinstance(outs, (tuple, list))
            outs = [outs] if single else list(outs)
            d2h = []
            for j, o in enumerate(outs):
                s = popxl.d2h_stream(o.shape, o.dtype, name=f"out{j}")
                ops.host_store(s, o)
                d2h.append(s)
        session = popxl.Session(ir, device)
        with session:
            res = session.run({s: np.asarray(a) for s, a in zip(streams, inputs)})
    finally:
        if old is None:
            os.environ.pop("IPU_SIM_TARGET", None)
        else:
            os.environ["IPU_SIM_TARGET"] = old
    results = [res[s] for s in d2h]
    return (results[0] if single else results), session
