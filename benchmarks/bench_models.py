"""The torchvision model zoo through popart.InferenceSession on the simulated GC200, next to PyTorch.

    python benchmarks/bench_models.py [--models resnet18 mobilenet_v2 ...] [--batches 1 4]
                                      [--largest] [--max-batch 64] [--json out.json]

For each model of benchmarks/model_zoo.py (random weights, the ONNX PyTorch exports at opset 11; 14
for ViT-B/16) and batch: the time to compile (prepareDevice), the wall time of one inference step
(after a first run) against PyTorch on this CPU (one thread, best of 3 after a warm-up), the
simulated cycles of a step, the largest relative difference of the logits from PyTorch's, and
memory: the total over the 1,472 tiles and the worst tile, each by category (variables, constants,
temporaries, vertex code, vertex state, exchange code, control code, stack). A model that does not fit prints the worst
tile the out-of-memory report names, by category, instead.

--largest also looks for the largest batch that fits (compiles only: doubling from the largest
batch that ran, then halving the gap; up to --max-batch). Real model sizes: each model takes up to a
few minutes and a few GB (ResNet-50 ~2 min and 4 GB at batch 1); run one benchmark at a time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import _timing  # noqa: E402  (before NumPy)

_timing.one_blas_thread()

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import model_zoo as zoo  # noqa: E402
import popart  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)  # as NumPy's BLAS (_timing.one_blas_thread): two pools stall each other on a shared host

ZOO = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x1_0",
       "densenet121", "squeezenet1_1", "vit_b_16", "vgg11", "vgg16"]
CATEGORIES = ("variables", "constants", "temporaries", "vertex_code", "vertex_state", "exchange_code",
              "control_code", "stack")
TILES = 1472


def _session(proto):
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": TILES})
    opts = popart.SessionOptions()
    opts.instrumentWithHardwareCycleCounter = True
    return popart.InferenceSession(proto, popart.DataFlow(1, {"logits": popart.AnchorReturnType("All")}), device,
                                   userOptions=opts)


def _oom_row(e) -> dict:
    err = e.__cause__ if e.__cause__ is not None else e
    report = getattr(err, "report", None) or []
    row = {"fits": False, "error": str(e).splitlines()[0]}
    if report:
        row["worst_tile"] = {"tile": report[0]["tile"], "total": report[0]["total"],
                             "categories": {c: int(v) for c, v in report[0]["categories"].items()}}
        if report[0].get("code_by_op_kind"):
            row["code_by_op_kind"] = report[0]["code_by_op_kind"][:3]
    return row


def compile_only(name: str, batch: int) -> bool:
    """Whether the model fits at this batch (prepareDevice only)."""
    try:
        _session(zoo.export_onnx(zoo.build(name), name, batch)).prepareDevice()
        return True
    except popart.OutOfMemoryException:
        return False


def run(name: str, batch: int) -> dict:
    model = zoo.build(name)
    proto = zoo.export_onnx(model, name, batch)
    x = np.random.default_rng(0).standard_normal(zoo.input_shape(name, batch)).astype(np.float32)
    xt = torch.from_numpy(x)
    with torch.no_grad():
        want = model(xt).numpy()  # also the warm-up
        torch_s = _timing.best_of(lambda: model(xt), 3)
    s = _session(proto)
    t0 = time.perf_counter()
    try:
        s.prepareDevice()
    except popart.OutOfMemoryException as e:
        return {"model": name, "batch": batch, "compile_s": time.perf_counter() - t0, **_oom_row(e)}
    compile_s = time.perf_counter() - t0
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({"input": x}, out))  # the first run loads the kernels
    t1 = time.perf_counter()
    s.run(popart.PyStepIO({"input": x}, out))
    step_s = time.perf_counter() - t1
    got = out["logits"].reshape(want.shape)
    plan = s._session.executable.plan
    total = plan.tile_total()
    worst = int(np.argmax(total))
    cats = plan.categories
    return {"model": name, "batch": batch, "fits": True, "compile_s": compile_s, "step_s": step_s,
            "torch_s": torch_s, "cycles": int(s.getCycleCount()),
            "rel_err": float(np.abs(got - want).max() / np.abs(want).max()),
            "total": {c: int(cats[c].sum()) for c in CATEGORIES if c in cats},
            "worst_tile": {"tile": worst, "total": int(total[worst]),
                           "categories": {c: int(cats[c][worst]) for c in CATEGORIES if c in cats}}}


def largest_batch(name: str, fits_at: int, cap: int) -> int:
    """The largest batch <= cap that compiles, from one known to (doubling, then bisection)."""
    lo, hi = fits_at, None
    b = fits_at * 2
    while b <= cap and hi is None:
        if compile_only(name, b):
            lo, b = b, b * 2
        else:
            hi = b
    hi = hi if hi is not None else cap + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if compile_only(name, mid) else (lo, mid)
    return lo


def _kb(n) -> str:
    return f"{n / 1024:,.0f}K"


def show(rows):
    for r in rows:
        head = f"{r['model']} b{r['batch']}"
        if not r["fits"]:
            w = r.get("worst_tile")
            print(f"{head}: does not fit ({r['error']})")
            if w:
                print(f"   worst tile {w['tile']}: {w['total']:,} B: " +
                      ", ".join(f"{c} {_kb(v)}" for c, v in w["categories"].items() if v))
            continue
        w = r["worst_tile"]
        print(f"{head}: compile {r['compile_s']:.1f} s, step {r['step_s']:.2f} s (PyTorch {r['torch_s'] * 1e3:.0f} ms, "
              f"x{r['step_s'] / r['torch_s']:.0f}), {r['cycles']:,} cycles, rel err {r['rel_err']:.1e}")
        print(f"   total {sum(r['total'].values()) / 2**20:,.1f} MiB: " +
              ", ".join(f"{c} {v / 2**20:.1f}M" for c, v in r["total"].items() if v))
        print(f"   worst tile {w['tile']} {w['total']:,} B: " +
              ", ".join(f"{c} {_kb(v)}" for c, v in w["categories"].items() if v))
        if "largest_batch" in r:
            print(f"   largest batch that fits: {r['largest_batch']}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=ZOO, choices=list(zoo.MODELS))
    p.add_argument("--batches", nargs="+", type=int, default=[1])
    p.add_argument("--largest", action="store_true", help="also find the largest batch that fits (compiles only)")
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--json", help="write the rows to this file")
    a = p.parse_args(argv)
    rows = []
    for name in a.models:
        for batch in a.batches:
            row = run(name, batch)
            rows.append(row)
            show([row])
        ran = [r["batch"] for r in rows if r["model"] == name and r["fits"]]
        if a.largest and ran:
            rows[-1]["largest_batch"] = largest_batch(name, max(ran), a.max_batch)
            print(f"   {name}: largest batch that fits: {rows[-1]['largest_batch']}")
        sys.stdout.flush()
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
