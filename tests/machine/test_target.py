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


def test_published_clocks_and_named_targets(monkeypatch):
    # GC2 parts run at 1.6 GHz: 1216 tiles x 64 FLOP x 1.6 GHz = Jia et al.'s 124.5 TFLOPS
    assert ipu.GC2.clock_hz == 1.6e9
    assert ipu.GC2.num_tiles * ipu.GC2.peak_flops_per_cycle_half * ipu.GC2.clock_hz == pytest.approx(124.5e12, rel=1e-3)
    # Bow: 350 TFLOPS half; C600: 280 TFLOPS half, 4 IPU-Links
    assert ipu.get_target("Bow") is ipu.BOW and ipu.BOW.clock_hz == 1.85e9
    assert 1472 * 128 * ipu.BOW.clock_hz == pytest.approx(348.57e12, rel=1e-4)
    assert ipu.get_target("c600") is ipu.C600 and ipu.C600.ipu_links == 4
    assert 1472 * 128 * ipu.C600.clock_hz == pytest.approx(280e12)
    monkeypatch.setenv("IPU_SIM_TARGET", "Bow")
    assert ipu.get_target() is ipu.BOW
    with pytest.raises(ValueError, match="'Bow'.*'C600'"):
        ipu.get_target("bow3000")


def test_compute_set_launch_is_charged_once_per_tile():
    from ipu import costs

    t = ipu.small_target(3)
    # two worker vertices on tile 0, none on tile 1, a supervisor vertex on tile 2
    c = costs.compute_set_tile_cycles([0, 0, 2], [10, 20, 100], [False, False, True], t)
    L = t.compute_set_launch_cycles
    assert list(c) == [6 * 20 + L, 0, 100 + L]
