"""Empty tensors on the machine: no memory, and exchanges, host and remote transfers that move
nothing cost nothing and need no sync (only moving data makes tiles wait for each other)."""
import numpy as np
import pytest

import ipu


@pytest.mark.parametrize("compiled", [False, True])
def test_empty_transfers_are_free_steps_without_a_sync(compiled):
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (0, 3), "float32")
    y = g.add_variable("y", (0, 3), "float32")
    full = g.add_variable("full", (4,), "float32")
    g.map_linearly(full)
    inp = g.add_host_to_device_stream("in", (0, 3), "float32")
    out = g.add_device_to_host_stream("out", (0, 3), "float32")
    rb = g.add_remote_buffer("rb", (0, 3), "float32", entries=2)
    prog = ipu.Repeat(2, ipu.Sequence(ipu.HostToDevice(inp, x), ipu.Copy(x, y), ipu.RemoteStore(y, rb, 1),
                                      ipu.RemoteLoad(rb, 0, x), ipu.DeviceToHost(y, out),
                                      ipu.MultiExchange(ipu.RemoteStore(x, rb, 0), ipu.RemoteLoad(rb, 1, y))))
    exe = ipu.compile(g, prog)
    assert {s.kind for s in exe.steps} == {"host_to_device", "exchange", "remote_store", "remote_load",
                                           "device_to_host"}  # no sync steps
    assert all(s.cycles == 0 and s.bytes_moved == 0 for s in exe.steps)
    assert exe.plan.categories["variables"].sum() == 16  # only `full`
    e = ipu.Engine(exe, compiled=compiled)
    e.connect_stream("in", np.zeros((2, 0, 3), np.float32))
    result = np.zeros((2, 0, 3), np.float32)
    e.connect_stream("out", result)
    assert e.run() == 0
    assert e.read_tensor(x).shape == (0, 3) and e.read_remote(rb).shape == (2, 0, 3)
    e.write_tensor(x, np.zeros((0, 3), np.float32))
    with pytest.raises(ipu.StreamError, match="must be empty"):
        e.connect_stream("out", np.zeros((2, 1, 3), np.float32))
