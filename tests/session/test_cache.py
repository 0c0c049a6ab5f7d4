"""The executable cache (popxl/_cache.py): a Session of an Ir compiled before loads the executable,
in this process or another; the key changes with everything that changes the executable; a
corrupt or stale entry is compiled again with a warning, never used; writers never leave half an
entry."""
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl import _cache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    monkeypatch.delenv("POPXL_CACHE_DIR", raising=False)
    monkeypatch.delenv("POPART_CACHE_DIR", raising=False)


def _ir(cache=None, scale=2.0, w=1.0, engine_options=None, name="y"):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.h2d_stream((3,), popxl.float32, "x")
        v = popxl.variable(np.full(3, w, np.float32), name="w")
        y = ops.host_load(x) * v + popxl.constant(np.full(3, scale, np.float32))
        ops.var_updates.accumulate_(v, y)
        o = popxl.d2h_stream((3,), popxl.float32, name)
        ops.host_store(o, y)
    if cache is not None:
        opts = ir._pb_ir.getSessionOptions()
        opts.enableEngineCaching = True
        opts.cachePath = str(cache)
        opts.engineOptions.update(engine_options or {})
    return ir, x, v, o


def _run(ir, x, v, o):
    s = popxl.Session(ir, "ipu_model")
    with s:
        out = s.run({x: np.arange(3, dtype=np.float32)})[o]
    return s, out, s.get_tensor_data(v)


def test_a_second_session_of_the_same_ir_loads_the_executable(tmp_path):
    first, out1, w1 = _run(*_ir(tmp_path))
    assert not first.loaded_from_cache and len(list(tmp_path.glob("*.popef"))) == 1
    second, out2, w2 = _run(*_ir(tmp_path))
    assert second.loaded_from_cache
    np.testing.assert_array_equal(out1, out2)
    np.testing.assert_array_equal(w1, w2)
    assert first.total_cycles == second.total_cycles
    # the variables' values are not part of the executable: new values, same entry, used
    third, out3, _ = _run(*_ir(tmp_path, w=5.0))
    assert third.loaded_from_cache
    np.testing.assert_array_equal(out3, np.arange(3) * 5.0 + 2.0)
    assert len(list(tmp_path.glob("*.popef"))) == 1


@pytest.mark.parametrize("change", [dict(scale=3.0), dict(engine_options={"opt.enableInlining": "true"}),
                                    dict(name="z")])
def test_what_changes_the_executable_changes_the_key(tmp_path, change):
    _run(*_ir(tmp_path))
    s, out, _ = _run(*_ir(tmp_path, **change))
    assert not s.loaded_from_cache and len(list(tmp_path.glob("*.popef"))) == 2
    if "scale" in change:
        np.testing.assert_array_equal(out, np.arange(3) + 3.0)


def _training_ir():
    """A weight read twice: autodiff sums its two partial gradients (ops tagged grad_sum)."""
    ir = popxl.Ir()
    with ir.main_graph:
        fwd = ir.create_graph(lambda a: ops.sum(a * a + a), popxl.TensorSpec((3,), popxl.float32))
        grads = popxl.transforms.autodiff(fwd)
    assert any(op.attrs.get("grad_sum") is not None for op in grads.graph._ops)
    return ir


def test_a_gradient_graph_built_twice_has_one_key():
    """Autodiff's grad_sum tags name the Ir's own tensors, not a count kept across Irs: the same
    training program rebuilt in one process hits the same cache entry."""
    first, second = (_cache.executable_key(_training_ir(), "target", "ipu_model", 1) for _ in range(2))
    assert first == second


def test_another_target_is_another_entry(tmp_path, monkeypatch):
    _run(*_ir(tmp_path))
    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")
    s, _, _ = _run(*_ir(tmp_path))
    assert not s.loaded_from_cache


def test_environment_variables_turn_caching_on(tmp_path, monkeypatch):
    monkeypatch.setenv("POPXL_CACHE_DIR", str(tmp_path / "a"))
    _run(*_ir())
    assert len(list((tmp_path / "a").glob("*.popef"))) == 1
    monkeypatch.delenv("POPXL_CACHE_DIR")
    monkeypatch.setenv("POPART_CACHE_DIR", str(tmp_path / "b"))
    assert _cache.cache_dir(_ir()[0]) == tmp_path / "b"


@pytest.mark.parametrize("damage", ["garbage", "truncated", "old_format", "other_key", "plain_pickle"])
def test_an_unusable_entry_is_compiled_again_with_a_warning_and_replaced(tmp_path, capfd, damage):
    _run(*_ir(tmp_path))
    path, = tmp_path.glob("*.popef")
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a pickle")
    elif damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "plain_pickle":  # format 1's entries: one pickle, no header
        path.write_bytes(pickle.dumps({"format": 1, "key": path.stem}))
    else:
        entry = _cache.decode(path)
        entry["format" if damage == "old_format" else "key"] = 0 if damage == "old_format" else "0" * 64
        tmp = path.with_suffix(".new")
        with open(tmp, "wb") as f:
            _cache.encode(entry, f)
        os.replace(tmp, path)
    capfd.readouterr()
    s, out, _ = _run(*_ir(tmp_path))
    assert not s.loaded_from_cache
    err = capfd.readouterr().err
    assert "cannot be used" in err and "compiling again" in err
    np.testing.assert_array_equal(out, np.arange(3) + 2.0)
    again, _, _ = _run(*_ir(tmp_path))  # the entry was replaced by a good one
    assert again.loaded_from_cache


def test_concurrent_writers_never_leave_half_an_entry(tmp_path):
    key = "ab" * 32
    lowered_like = type("L", (), {})()
    for k in ("variables", "constants", "h2d", "d2h", "remote_buffers", "remote_variables", "fragments"):
        setattr(lowered_like, k, {})
    lowered_like.op_names = {}
    big = np.zeros(4_000_000, np.uint8)  # a few MB so a write takes a while

    def write():
        for _ in range(5):
            _cache.store(tmp_path, key, big, lowered_like)

    threads = [threading.Thread(target=write) for _ in range(3)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        p = tmp_path / f"{key}.popef"
        if p.exists():
            entry = _cache.decode(p)  # never a partial file
            assert entry["executable"].size == big.size
    for t in threads:
        t.join()
    assert not list(tmp_path.glob("*.tmp"))


def test_a_new_process_loads_what_another_compiled(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import numpy as np, popxl, popxl.ops as ops, popart\n"
        "popart.getLogger().setLevel('DEBUG')\n"
        "ir = popxl.Ir(replication=2)\n"
        "with ir.main_graph:\n"
        "    x = popxl.variable(np.ones((4, 4), np.float32), name='x')\n"
        "    g = ir.create_graph(lambda a: ops.gelu(a @ a), x)\n"
        "    y, = ops.call(g, x)\n"
        "    ops.host_store(popxl.d2h_stream(y.shape, y.dtype, 'y'), ops.print_tensor(y, 'y'))\n"
        "with popxl.Session(ir, 'ipu_model') as s:\n"
        "    s.run()\n"
        "print('cycles', s.total_cycles)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), POPXL_CACHE_DIR=str(tmp_path / "cache"), IPU_SIM_TARGET="small:4")
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert "Starting compilation" in runs[0].stderr and "Loading serialized PopART executable" not in runs[0].stderr
    assert "Loading serialized PopART executable" in runs[1].stderr and "Starting compilation" not in runs[1].stderr
    assert runs[0].stdout == runs[1].stdout  # same cycles
    assert runs[0].stderr.count("y: [") == runs[1].stderr.count("y: [") == 1  # the print callback survives


def test_an_ir_the_key_cannot_describe_compiles_without_the_cache(tmp_path):
    ir, x, v, o = _ir(tmp_path)
    ir.main_graph._ops[0].attrs["_opaque"] = object()  # a Python object with no stable description
    s, out, _ = _run(ir, x, v, o)
    assert not s.loaded_from_cache and not list(tmp_path.glob("*.popef"))
    np.testing.assert_array_equal(out, np.arange(3) + 2.0)


def test_large_arrays_load_as_writable_views_of_the_mapped_entry(tmp_path):
    """Arrays of 64 KiB or more are stored out of the pickle and load without a copy, as writable
    arrays of their type (the kernels take them like any array) whose writes stay in the process."""
    big = np.arange(100_000, dtype=np.int64).reshape(1000, 100)
    small = np.arange(10, dtype=np.float32)
    entry = {"format": _cache.FORMAT_VERSION, "big": big, "small": small, "strided": big[:, ::2], "n": 3}
    path = tmp_path / "e.popef"
    with open(path, "wb") as f:
        _cache.encode(entry, f)
    got = _cache.decode(path)
    for k in ("big", "small", "strided"):
        np.testing.assert_array_equal(got[k], entry[k])
        assert got[k].dtype == entry[k].dtype and got[k].flags.writeable
    assert got["n"] == 3
    assert got["big"].base is not None and not got["big"].flags.owndata  # a view of the mapping
    got["big"][0, 0] = -1
    assert _cache.decode(path)["big"][0, 0] == 0  # copy-on-write: the file is unchanged


def test_the_pickle_streams_into_the_file(tmp_path):
    """An entry's in-band part (its many small arrays: 230 MB for BERT-base) is written as it is
    pickled, never held whole in memory beside the executable."""
    import tracemalloc

    entry = {"format": _cache.FORMAT_VERSION, "small": [np.arange(1000, dtype=np.int64) for _ in range(5000)]}
    tracemalloc.start()
    try:
        with open(tmp_path / "e.popef", "wb") as f:
            _cache.encode(entry, f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10e6, peak  # the in-band part is 40 MB
    got = _cache.decode(tmp_path / "e.popef")
    assert all(np.array_equal(a, b) for a, b in zip(got["small"], entry["small"]))
