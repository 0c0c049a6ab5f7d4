"""Run a popxl function through Session on a small simulated IPU and return NumPy outputs."""
import numpy as np

import popxl
import popxl.ops as ops


def run_popxl(build, inputs, target="small:6", device="ipu_model", monkeypatch=None, reference=True):
    """build(*tensors) -> tensor or tuple of tensors, called inside the main graph with one
    host_load per input array. Returns the outputs as NumPy arrays (and the session).

    The same Ir also runs on popxl.reference (the NumPy definition of every op); its outputs must
    match the simulator's (`reference=False` leaves that out, for behaviour the IR leaves undefined)."""
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
    if reference:
        from popxl import reference as popxl_reference

        ref = popxl_reference.run(ir, {s: np.asarray(a) for s, a in zip(streams, inputs)})
        for j, s in enumerate(d2h):
            assert_matches_reference(results[j], ref[s], f"output {j}")
    return (results[0] if single else results), session


def assert_matches_reference(got, want, what="output"):
    """The simulator's result against popxl.reference's: exact for integers and bools, to a few
    ulps of accumulated rounding for floats (NaN where the reference has NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: simulator {got.dtype}{got.shape}, reference {want.dtype}{want.shape}"
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=f"{what} differs from popxl.reference")
        return
    tol = dict(rtol=2e-2, atol=2e-2) if got.dtype == np.float16 else dict(rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), equal_nan=True,
                               err_msg=f"{what} differs from popxl.reference", **tol)


# Peak RSS of a test's subprocess, to paste into its script: the kernel's high-water mark of the
# process's own memory (VmHWM). getrusage's ru_maxrss is no use there: Linux carries the parent's
# high-water mark over the fork and exec, so a child of a 1.4 GB pytest process reports 1.4 GB.
PEAK_RSS_SOURCE = '''
def peak_rss():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
'''
