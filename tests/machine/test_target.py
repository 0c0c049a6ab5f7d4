import pytest

import ipu


def test_gc200_constants():
    t = ipu.GC200
    assert t.tiles_per_ipu == 1472
    assert t.bytes_per_tile == 638_976
    assert t.clock_hz == 1.33e9
    assert t.worker_contexts == 6
    assert t.exchange_bytes_per_cycle == 4
    assert t.num_tiles == 1472


def test_gc2_and_small_targets():
    assert ipu.GC2.tiles_per_ipu == 1216 and ipu.GC2.bytes_per_tile == 262_144
    s = ipu.small_target(3)
    assert s.num_tiles == 3 and s.bytes_per_tile == ipu.GC200.bytes_per_tile


def test_get_target_by_name_and_env(monkeypatch):
    assert ipu.get_target("mk1") is ipu.GC2
    assert ipu.get_target("small:5").num_tiles == 5
    monkeypatch.setenv("IPU_SIM_TARGET", "small:2")
    assert ipu.get_target().num_tiles == 2
    with pytest.raises(ValueError, match="Unknown IPU target"):
        ipu.get_target("gc9000")


def test_inter_ipu_sync_formula():
    t = ipu.GC200.with_ipus(4)
    # ceil(15 ns x 1.33 GHz x (1 + 4/4) x 2) = ceil(79.8) = 80
    assert t.inter_ipu_sync_cycles() == 80
    assert t.num_tiles == 4 * 1472
