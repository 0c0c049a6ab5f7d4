"""PopXL's own helpers for a run's host arrays (Session._full_input_shape, _validate_run_inputs,
_validate_run_outputs), which Graphcore's tutorials and tests call: their rules and texts."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")


def _ir(data_shape, replicas, transfers):
    ir = popxl.Ir()
    with ir.main_graph:
        body = ir.create_empty_graph("body")
        x = popxl.h2d_stream(data_shape, popxl.float32, name="x")
        y = popxl.d2h_stream(data_shape, popxl.float32, name="y")
        with body, popxl.in_sequence():
            ops.host_store(y, ops.host_load(x, "x") * 2.0)
        ops.repeat(body, repeat_count=transfers)
    ir.num_host_transfers = transfers
    ir.replication_factor = replicas
    return ir, x, y


@pytest.mark.parametrize("data_shape", [(1,), (4, 4), (4,)])
@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("transfers", [1, 3])
def test_full_input_shape_and_accepted_arrays(data_shape, replicas, transfers):
    ir, x, y = _ir(data_shape, replicas, transfers)
    sess = popxl.Session(ir, "ipu_model")
    lead = tuple(d for d in (transfers, replicas) if d > 1)
    assert sess._full_input_shape(x.shape) == lead + data_shape
    assert sess._extra_input_dims == lead
    full = np.zeros((transfers, replicas) + data_shape, np.float32)
    # the full shape, squeezed or not (PopXL accepts both; squeezing is what users do)
    for arr in (full.reshape(lead + data_shape), full.squeeze()):
        sess._validate_run_inputs({x: arr})
        sess._validate_run_outputs({y: arr})


def test_wrong_leading_dims_get_popxl_texts():
    ir, x, y = _ir((4,), 2, 3)
    sess = popxl.Session(ir, "ipu_model")
    with pytest.raises(ValueError, match=r"Dimension 0 \(2\) for the array provided for input stream x is not large "
                                         r"enough.\nIt should be at least of size num_host_transfers = 3"):
        sess._validate_run_inputs({x: np.zeros((2, 2, 4), np.float32)})
    with pytest.raises(ValueError, match=r"Dimension 1 \(3\) for the array provided for output stream y is the wrong "
                                         r"size.\nIt should be of size replication_factor = 2"):
        sess._validate_run_outputs({y: np.zeros((3, 3, 4), np.float32)})
    with pytest.raises(ValueError, match=r"Shape mismatch for input stream x:\nStream shape = \(4,\), therefore "
                                         r"expected full global batch shape \(3, 2, 4\). Got array shape = \(3, 2, 5\)"):
        sess._validate_run_inputs({x: np.zeros((3, 2, 5), np.float32)})
    with pytest.raises(ValueError, match=r"Unexpected/Missing output.\n  Unexpected: set\(\)\n  Missing: \{'DeviceToHostStream\[y"):
        sess._validate_run_outputs({})
    assert sess._expected_outputs() == [y]


def test_a_longer_transfers_dimension_feeds_its_first_entries():
    """PopXL checks only that dimension 0 holds at least num_host_transfers batches."""
    ir, x, y = _ir((2,), 1, 3)
    sess = popxl.Session(ir, "ipu_model")
    data = np.arange(10, dtype=np.float32).reshape(5, 2)
    with sess:
        out = sess.run({x: data})
    np.testing.assert_array_equal(out[y], data[:3] * 2)
