"""PopXL remote buffers and remote variables through the Session: values round-trip at several
offsets (int and tensor), in place and out of place, per replica; validation; Session access to
remote variables; merge_exchange."""
import numpy as np
import pytest

import ipu
import popxl
import popxl.dtypes as dtypes
import popxl.ops as ops
from popxl.tensorlocation import TensorStorage


def test_remote_variable_example_from_the_popxl_user_guide():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        x = np.array(1).astype(np.int32)
        buffer = popxl.remote_buffer(x.shape, dtypes.int32, 1)
        remote_x = popxl.remote_variable(x, buffer, 0)
        loaded_x = ops.remote_load(buffer, 0)
        y = popxl.variable(2)
        ops.var_updates.accumulate_(loaded_x, y)
        ops.remote_store(buffer, 0, loaded_x)
        y_d2h = popxl.d2h_stream(loaded_x.shape, loaded_x.dtype)
        ops.host_store(y_d2h, loaded_x)
    with popxl.Session(ir, "ipu_model") as session:
        outputs = session.run({})
        final_weight = session.get_tensor_data(remote_x)
    assert outputs[y_d2h] == 3
    assert final_weight == 3
    assert remote_x.location_info.storage == TensorStorage.OffChip


def _store_load_ir(entries, shape, int_offsets):
    """Store host inputs at entries, then load each entry back (int or tensor offsets)."""
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        buf = popxl.remote_buffer(shape, popxl.float32, entries)
        s_in = popxl.h2d_stream(shape, popxl.float32, name="x")
        s_off = popxl.h2d_stream((), popxl.int32, name="off")
        outs = []
        for e in range(entries):
            x = ops.host_load(s_in)
            off = e if int_offsets else ops.host_load(s_off)
            ops.remote_store(buf, off, x * 1.0)
        for e in reversed(range(entries)):
            off = e if int_offsets else ops.host_load(s_off)
            t = ops.remote_load(buf, off, name=f"load{e}")
            o = popxl.d2h_stream(shape, popxl.float32, name=f"o{e}")
            ops.host_store(o, t)
            outs.append((e, o))
    return ir, s_in, s_off, outs


@pytest.mark.parametrize("int_offsets", [True, False])
def test_values_round_trip_through_several_entries(int_offsets):
    entries, shape = 5, (3, 7)
    ir, s_in, s_off, outs = _store_load_ir(entries, shape, int_offsets)
    data = np.random.default_rng(0).normal(size=(entries,) + shape).astype(np.float32)
    ir.num_host_transfers = entries if int_offsets else 2 * entries
    inputs = {s_in: np.concatenate([data, data])[:ir.num_host_transfers]}
    if not int_offsets:
        inputs[s_off] = np.concatenate([np.arange(entries), np.arange(entries)[::-1]]).astype(np.int32)
    with popxl.Session(ir, "ipu_model") as sess:
        res = sess.run(inputs)
    for e, o in outs:  # each output stream is written once: the first of its num_host_transfers slots
        np.testing.assert_array_equal(res[o][0], data[e])


def test_remote_load_inplace_and_tensor_offset_from_a_computation():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        buf = popxl.remote_buffer((4,), popxl.float32, 3)
        w = popxl.remote_variable(np.arange(4, dtype=np.float32), buf, 2)
        popxl.remote_variable(np.full(4, 9, np.float32), buf, 1)
        t = popxl.variable(np.zeros(4, np.float32), name="t")
        one = popxl.variable(np.int32(1), name="one")
        two = one + one  # a computed offset: read when the program runs
        r = ops.remote_load_(buf, two, t)
        r += 1.0
        ops.remote_store(buf, one, r)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        np.testing.assert_array_equal(sess.get_tensor_data(t), np.arange(4) + 1)
        np.testing.assert_array_equal(sess.get_tensor_data(w), np.arange(4))
        np.testing.assert_array_equal(sess.engine.read_remote(sess._lowered.remote_buffers[buf], 1),
                                      np.arange(4) + 1)


def test_remote_variables_read_and_write_through_the_session():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        buf = popxl.remote_buffer((2, 3), popxl.float32, 2)
        a = popxl.remote_variable(np.ones((2, 3), np.float32), buf, 0, name="a")
        b = popxl.remote_variable(np.zeros((2, 3), np.float32), buf, 1, name="b")
        x = ops.remote_load(buf, 0)
        ops.remote_store(buf, 1, x * 2.0)
    sess = popxl.Session(ir, "ipu_model")
    np.testing.assert_array_equal(sess.get_tensor_data(b), np.zeros((2, 3)))
    with sess:
        sess.run()
        np.testing.assert_array_equal(sess.get_tensor_data(b), np.full((2, 3), 2.0))
        sess.write_variable_data(a, np.full((2, 3), 5, np.float32))
        sess.run()
        np.testing.assert_array_equal(sess.get_tensor_data(b), np.full((2, 3), 10.0))
        np.testing.assert_array_equal(sess.get_tensor_data(a), np.full((2, 3), 5.0))
    # detached: writes go to the host copy and reach streaming memory on the next attach
    sess.write_variable_data(a, np.full((2, 3), -1, np.float32))
    with sess:
        sess.run()
        np.testing.assert_array_equal(sess.get_tensor_data(b), np.full((2, 3), -2.0))
        sess.weights_from_host()
        np.testing.assert_array_equal(sess.engine.read_remote(sess._lowered.remote_buffers[buf], 0),
                                      np.full((2, 3), -1.0))
    np.testing.assert_array_equal(sess.get_tensors_data([b])[b], np.full((2, 3), -2.0))


def test_remote_variables_get_no_tile_memory():
    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.remote_buffer((1000,), popxl.float32, 4)
        for i in range(4):
            popxl.remote_variable(np.full(1000, i, np.float32), buf, i)
        y = ops.remote_load(buf, 3)
        o = popxl.d2h_stream((1000,), popxl.float32)
        ops.host_store(o, y)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
    np.testing.assert_array_equal(out[o], np.full(1000, 3.0))
    assert sess.executable.plan.categories["variables"].sum() == 0


def test_replica_grouped_remote_variables():
    ir = popxl.Ir(replication=2)
    v_h = np.arange(64).reshape(2, 32).astype(np.int32)
    rg = ir.replica_grouping(group_size=1)
    with ir.main_graph, popxl.in_sequence():
        rb = popxl.remote_buffer((32,), dtypes.int32)
        remote_v = popxl.remote_variable(v_h, rb, replica_grouping=rg)
        v = ops.remote_load(rb, 0)
        v += 1
        ops.remote_store(rb, 0, v)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
    np.testing.assert_array_equal(sess.get_tensor_data(remote_v), v_h + 1)


def test_validation_errors():
    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.remote_buffer((2, 2), popxl.float32, 2)
        x = popxl.variable(np.zeros((2, 2), np.float32))
        with pytest.raises(ValueError, match="positive"):
            popxl.remote_buffer((2,), popxl.float32, 0)
        with pytest.raises(ValueError):
            ops.remote_store(buf, 0, popxl.variable(np.zeros(3, np.float32)))
        with pytest.raises(ValueError):
            ops.remote_store(buf, 0, popxl.variable(np.zeros((2, 2), np.int32)))
        with pytest.raises(ValueError, match=">= 0"):
            ops.remote_load(buf, -1)
        with pytest.raises(TypeError):
            ops.remote_load(buf, 1.5)
        with pytest.raises(TypeError, match="integer"):
            ops.remote_load(buf, x)
        with pytest.raises(TypeError):
            ops.remote_load("buffer", 0)
        with pytest.raises(ValueError, match="not an entry"):
            popxl.remote_variable(np.zeros((2, 2), np.float32), buf, 2)
        with pytest.raises(ValueError, match="does not match"):
            popxl.remote_variable(np.zeros((3, 2), np.float32), buf, 0)
        popxl.remote_variable(np.zeros((2, 2), np.float32), buf, 0)
        with pytest.raises(ValueError, match="already holds"):
            popxl.remote_variable(np.zeros((2, 2), np.float32), buf, 0)
        ops.remote_load(buf, 1)
    g = ir.create_empty_graph("sub")
    with g, pytest.raises(ValueError):
        popxl.remote_variable(np.zeros((2, 2), np.float32), buf, 1)


def test_an_offset_beyond_the_entries_fails_when_compiling():
    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.remote_buffer((2,), popxl.float32, 2)
        ops.remote_load(buf, 2)
    with pytest.raises(ValueError, match="outside"):
        popxl.Session(ir, "ipu_model")


def test_a_remote_variable_used_directly_is_a_clear_error():
    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.remote_buffer((2,), popxl.float32, 1)
        w = popxl.remote_variable(np.zeros(2, np.float32), buf, 0)
        _ = w + 1.0
    with pytest.raises(ValueError, match="remote_load"):
        popxl.Session(ir, "ipu_model")


def test_buffers_over_128_mib_are_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.remote_buffer((2**25 + 1,), popxl.float32, 1)
        popxl.remote_variable(np.zeros(1, np.float32).repeat(2**25 + 1), buf, 0)
    with pytest.raises(ipu.CompileError, match="128 MiB"):
        popxl.Session(ir, "ipu_model")


def _merge_ir(merge: bool, io: bool = False):
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        buf = popxl.remote_buffer((64,), popxl.float32, 2)
        popxl.remote_variable(np.arange(64, dtype=np.float32), buf, 0)
        popxl.remote_variable(-np.arange(64, dtype=np.float32), buf, 1)
        s = popxl.h2d_stream((64,), popxl.float32, name="x")
        if io:
            ctx = popxl.transforms.io_tile_exchange()
        elif merge:
            ctx = popxl.transforms.merge_exchange()
        else:
            import contextlib
            ctx = contextlib.nullcontext()
        with ctx:
            a = ops.remote_load(buf, 0)
            b = ops.remote_load(buf, 1)
            x = ops.host_load(s)
        if io:  # transfers on the IO tiles: copy to the compute tiles to use them
            a, b, x = (ops.io_tile_copy(t) for t in (a, b, x))
        y = a + b + x
        o = popxl.d2h_stream((64,), popxl.float32, name="y")
        ops.host_store(o, y)
    return ir, s, o


@pytest.mark.parametrize("mode", ["merge_exchange", "io_tile_exchange"])
def test_merge_exchange_makes_one_sync_and_one_transfer_phase(mode):
    runs = {}
    for merged in (False, True):
        ir, s, o = _merge_ir(merged, io=(mode == "io_tile_exchange" and merged))
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run({s: np.ones(64, np.float32)})
        np.testing.assert_array_equal(out[o], np.ones(64))
        exe = sess.executable
        counts = sess.engine.step_counts()
        kinds = [exe.steps[i].kind for i in range(len(counts)) for _ in range(int(counts[i]))]
        runs[merged] = (kinds, sess.engine.cycles_by_kind())
    sep_kinds, sep_cycles = runs[False]
    m_kinds, m_cycles = runs[True]
    assert sep_kinds.count("remote_load") == 2 and sep_kinds.count("host_to_device") == 1
    assert m_kinds.count("remote_load") == 1 and "host_to_device" not in m_kinds
    io_copies = 3 if mode == "io_tile_exchange" else 0  # io_tile_copy: an exchange (and its sync) each
    assert m_kinds.count("sync") == sep_kinds.count("sync") - 2 + io_copies
    transfer = lambda c: c.get("remote_load", 0) + c.get("host_to_device", 0) + c.get("sync", 0)
    assert transfer(m_cycles) < transfer(sep_cycles)


def test_remote_replica_sharded_variable_example_from_the_user_guide():
    ir = popxl.Ir()
    ir.replication_factor = 2
    with ir.main_graph, popxl.in_sequence():
        x = np.array([1, 2]).astype(np.int32)
        buffer = popxl.remote_buffer((x.size // 2,), dtypes.int32, 1)
        remote_x = popxl.remote_replica_sharded_variable(x, buffer, 0)
        loaded_x = ops.remote_load(buffer, 0)
        assert loaded_x.meta_shape == (2,)
        y = popxl.variable([3, 4])
        full_x = ops.collectives.replicated_all_gather(loaded_x)
        ops.var_updates.accumulate_(full_x, y)
        ops.remote_store(buffer, 0, ops.collectives.replica_sharded_slice(full_x))
    with popxl.Session(ir, "ipu_model") as session:
        session.run({})
        final = session.get_tensor_data(remote_x)
        rb = session._lowered.remote_buffers[buffer]
        shards = [session.engine.read_remote(rb, 0, replica=r) for r in range(2)]
    np.testing.assert_array_equal(final, [4, 6])
    np.testing.assert_array_equal(np.concatenate(shards), [4, 6])  # each replica holds its shard


def test_remote_replica_sharded_variable_with_a_sharded_buffer_pads_the_last_shard():
    ir = popxl.Ir(replication=2)
    value = np.arange(5, dtype=np.float32)
    with ir.main_graph, popxl.in_sequence():
        buf = popxl.replica_sharded_buffer((5,), popxl.float32)
        assert buf.tensor_shape == (3,)
        v = popxl.remote_replica_sharded_variable(value, buf)
        shard = ops.remote_load(buf, 0)
        ops.remote_store(buf, 0, shard * 2.0)
        with pytest.raises(ValueError, match="shard"):
            popxl.remote_replica_sharded_variable(np.zeros(8, np.float32), buf)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
    np.testing.assert_array_equal(sess.get_tensor_data(v), value * 2)


@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float8_143])
def test_remote_replica_sharded_variable_in_a_buffer_of_the_whole_shape(dtype):
    """A plain remote buffer made with the whole value's shape holds its shards (as PopXL's
    float8 RTS test uses it): the entries become shards, the variable reads and writes whole."""
    from popxl.fp8_utils import host_pow2scale_cast_to_fp8
    vals = [np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([5.0, 6.0, 7.0, 8.0], np.float32)]
    if dtype == popxl.float8_143:
        vals = [host_pow2scale_cast_to_fp8(v, dtype, 0, True) for v in vals]
    ir = popxl.Ir(replication=2)
    with ir.main_graph, popxl.in_sequence():
        buf = popxl.RemoteBuffer((4,), dtype, 1)
        x = popxl.remote_replica_sharded_variable(vals[0], buf, 0, dtype=dtype)
        assert buf.tensor_shape == (2,) and buf.meta_shape == (4,)
        full = ops.collectives.replicated_all_gather(ops.remote_load(buf, 0))
        o = popxl.d2h_stream(full.shape, full.dtype)
        ops.host_store(o, full)
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run()[o]
        np.testing.assert_array_equal(out[0], vals[0])
        np.testing.assert_array_equal(s.get_tensor_data(x), vals[0])
        s.write_variable_data(x, vals[1])
        np.testing.assert_array_equal(s.run()[o][1], vals[1])
