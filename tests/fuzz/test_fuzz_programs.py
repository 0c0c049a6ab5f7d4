"""Random popxl programs against the NumPy reference interpreter of the same Ir (issue 17).

Each example is a random program (tests/fuzz/programs.py): elementwise, reduction, softmax,
matmul, shape and indexing ops and in-place updates over random shapes (sizes 1, primes, ...) and
dtypes (float32, float16, int32), in the main graph, in a called subgraph (called once or twice) or
in a repeat loop, on a 4- or 16-tile IPU. It must compile and run without any error, and every
output and the updated variable must equal the reference within the dtype's tolerance.
"""
import os

import numpy as np
from hypothesis import event, example, given, note
from hypothesis import strategies as st

import popxl

from .programs import OPS_FLOAT, OPS_INT, build, reference, tolerance

DIMS = st.sampled_from([1, 2, 3, 5, 7, 8, 13, 16])
SHAPES = st.lists(DIMS, min_size=0, max_size=3).map(tuple)
RAN = {"programs": 0}


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(["float32", "float32", "float16", "int32"]))
    pool = OPS_INT if dtype == "int32" else OPS_FLOAT
    first = draw(SHAPES)
    # further inputs: the same shape, a trailing part of it (broadcasts), or any shape
    more = draw(st.lists(st.one_of(st.just(first), st.just(first[1:]), SHAPES), max_size=2))
    op = st.tuples(st.sampled_from(pool), st.integers(0, 63), st.integers(0, 63), st.integers(0, 1000))
    wraps = ["none", "none", "call"] + ([] if dtype == "int32" else ["repeat"])
    return {
        "dtype": dtype,
        "inputs": [first, *more],
        "ops": draw(st.lists(op, min_size=1, max_size=8)),
        "wrap": draw(st.sampled_from(wraps)),
        "twice": draw(st.booleans()),
        "repeat": draw(st.integers(1, 4)),
        "outputs": draw(st.lists(st.integers(0, 63), max_size=2)),
        "variable": draw(st.booleans()),
        "tiles": draw(st.sampled_from([4, 16])),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def _check(desc, events=lambda name: None):
    built = build(desc)
    for t in sorted({op.type for g in built.ir.graphs for op in g.ops}):
        events(f"op {t}")
    want, want_var = reference(built)
    old = os.environ.get("IPU_SIM_TARGET")
    os.environ["IPU_SIM_TARGET"] = f"small:{desc['tiles']}"
    try:
        session = popxl.Session(built.ir, "ipu_model")
    finally:
        if old is None:
            del os.environ["IPU_SIM_TARGET"]
        else:
            os.environ["IPU_SIM_TARGET"] = old
    with session:
        got = session.run(dict(zip(built.streams, built.inputs)))
        var = session.get_tensor_data(built.variable) if built.variable is not None else None
    for s in built.outputs:
        ref = np.asarray(want[s])
        note(f"output {s.tensor_id}: reference {ref!r}, simulated {got[s]!r}")
        assert got[s].shape == ref.shape and got[s].dtype == ref.dtype
        np.testing.assert_allclose(got[s], ref, **tolerance(desc["dtype"], ref), err_msg=s.tensor_id)
    if var is not None:
        np.testing.assert_allclose(var, want_var, **tolerance(desc["dtype"], want_var), err_msg="variable")
    RAN["programs"] += 1


def _found(ops_, dtype="float32", inputs=((1,),), wrap="none", **kw):
    """A program the fuzzer once found failing: replayed by every run."""
    return {"dtype": dtype, "inputs": list(inputs), "ops": ops_, "wrap": wrap, "twice": False, "repeat": 1,
            "outputs": [1], "variable": False, "tiles": 4, "seed": 0, **kw}


# integer division rounds toward zero (the reference floored)
@example(_found([("div", 0, 0, 0)], dtype="int32", inputs=[(5,)]))
# an out-of-place dynamic_update / scatter of a tensor already in the column layout wrote into it
@example(_found([("div", 0, 0, 0), ("dynamic_update", 0, 0, 0), ("abs", 0, 0, 0)], wrap="call"))
@example(_found([("div", 0, 0, 0), ("scatter", 0, 0, 0), ("abs", 0, 0, 0)], inputs=[(3,)], wrap="call"))
# argmax of a repeat body's carried input (computed, with near ties): not a bug, the generator
# now treats it as inexact
@example(_found([("argmax_cast", 0, 0, 1)], inputs=[(2, 7)], wrap="repeat", repeat=3))
@given(programs())
def test_random_programs_match_the_reference(desc):
    note(f"program: {desc}")
    event(f"{desc['dtype']} {desc['wrap']}")
    _check(desc, event)


def teardown_module(module):
    if os.environ.get("IPU_SIM_FUZZ_PROFILE") == "long":
        print(f"\nfuzz: {RAN['programs']} programs compiled, ran and matched the reference")
