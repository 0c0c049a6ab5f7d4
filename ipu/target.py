"""The machine description: every constant of the simulated IPU, each with its source.

A Target is a frozen dataclass. `GC200` (Mk2 in an IPU-M2000, the default), `BOW` (the Bow IPU in a
Bow-2000), `C600` (the Mk2 IPU with float8 on a C600 PCIe card), `GC2` (Mk1 on a C2 card) and
`small_target()` (a few tiles, for fast tests) are provided; `get_target(name)` selects one by name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import env

__all__ = ["BOW", "C600", "GC2", "GC200", "Target", "get_target", "small_target"]


@dataclass(frozen=True)
class Target:
    name: str
    # Tiles per IPU. GC200: 1472, GC2: 1216.
    # Source: Graphcore profile-analyser tests; Louw & McIntosh-Smith 2021 (DESIGN.md section 6).
    tiles_per_ipu: int
    # Bytes of In-Processor memory per tile. GC200: 638,976 (624 KiB), GC2: 262,144. Same sources.
    bytes_per_tile: int
    # Tile clock. GC200 in an IPU-M2000: 1.33 GHz (250 TFLOPS half = 1472 x 128 x 1.33 GHz, IPU-M2000
    # datasheet). Bow IPU in a Bow-2000: 1.85 GHz (TessellateIPU's "IPU Peak Flops" notebook reads
    # tile_clock_frequency = 1.85e9 from a Bow device; 350 TFLOPS = 1472 x 128 x 1.85 GHz). C600:
    # 280 TFLOPS half (C600 product brief) = 1472 x 128 x 1.486 GHz. GC2 on a C2 card: 1.6 GHz
    # (Jia et al. 2019, arXiv 1912.03413, sec. 4: 124.5 TFLOPS mixed / 31.1 TFLOPS float peaks =
    # 1216 tiles x 64 / 16 FLOP x 1.6 GHz, the clock of the measured parts).
    clock_hz: float
    # IPUs per replica. Each IPU has its own tiles and memory.
    ipus: int = 1
    # Six worker contexts sharing the issue slots round robin (a worker issues once every 6 tile
    # cycles), plus one supervisor. Source: Poplar Vertex programming guide.
    worker_contexts: int = 6
    # Exchange bandwidth: 4 bytes per cycle per tile in each direction.
    # Source: poplibs ExchangeEstimator (exchangeBytesPerCycle); Graphcore tutorial 6.
    exchange_bytes_per_cycle: int = 4
    # Tiles sharing one exchange bus: the two tiles of a pair (2j, 2j + 1) that receive the same
    # data take it over their shared 64-bit bus, each at twice the rate. Source: poplibs
    # Target::getTilesPerSharedExchangeBus (2 on Mk2) and ExchangeEstimator::getCycles; poplin's
    # planner lays matmul / convolution tiles out so that the pairs share an input operand.
    # Mk1 (GC2): 1, no bus sharing (assumption: poplibs gates it on supportsExchangeBusSharing).
    tiles_per_shared_exchange_bus: int = 2
    # Fixed cost of one exchange phase on a tile (starting the exchange code, the first
    # send/receive latency). Derivation: tutorial 6 measured 8,743 exchange cycles per tile on Mk2
    # hardware against 8,697 on the IPU model for the same bytes, a ~46-cycle gap; we charge a
    # fixed 30 cycles per phase (assumption within that gap, not a measurement of its own).
    exchange_overhead_cycles: int = 30
    # On-IPU barrier synchronisation. Source: poplibs CTC planner (~90 cycles).
    sync_cycles: int = 90
    # Starting a compute set on a tile: the supervisor reads the compute set's vertex list, starts
    # its vertices and waits for them (the internal sync of a compute set). poplibs' estimators
    # count the vertex only, so single-vertex measurements on hardware run a fixed amount longer
    # at every size. Source: TessellateIPU (graphcore-research/tessellate-ipu,
    # tile_interpreter_hw_primitives.py, ipu_cycle_count_overhead) measured 45 cycles between two
    # successive cycle-count vertices on hardware, i.e. one compute set whose vertex reads the
    # counter and stores it (about 5 instructions, our assumption): 40 cycles of launch. It is
    # the same gap as its AMP measurements less poplin's estimate (36-39 cycles at every N,
    # notebooks/IPU Peak Flops.ipynb) and Graphcore's Mk2 ScaledAdd measurements less their probe
    # and poplibs' estimate (51-53 cycles); codelets/reference_hardware.csv scores both.
    compute_set_launch_cycles: int = 40
    # Inter-IPU sync: ceil(15 ns x f x (1 + nIPUs/4) x 2) cycles. Source: poplibs test IPU model.
    inter_ipu_sync_ns: float = 15.0
    # IPU-Link: 128 Gbit/s per link x 0.85 efficiency, 10 links per IPU. Source: poplibs test util
    # (GC200: 10 links, 320 GB/s both ways together = 10 x 2 x 16 GB/s, IPU-M2000 datasheet).
    ipu_link_gbps: float = 128.0
    ipu_link_efficiency: float = 0.85
    ipu_links: int = 10
    # How the IPU-Links are wired (ipu/links.py): "ladder" (IPU-M2000 / Bow-2000 and their PODs:
    # IPUs 2k and 2k + 1 are the rungs of a ladder whose two rails run through IPUs i, i + 2, ...,
    # closed into a ring at the ends) or "ring" (C600 cards in a ring, C600 product brief). Either
    # way neighbouring IPUs are joined by ipu_links_per_cable links: a C600 cable carries 2 (C600
    # product brief), and an IPU-M2000 rung pair measured 26.5 GB/s each way, 2 links at 128
    # Gbit/s x 0.83 (gc-iputraffictest's documented output; codelets/reference_hardware.csv).
    ipu_link_wiring: str = "ladder"
    ipu_links_per_cable: int = 2
    # Host <-> IPU streams. IPU-M2000 host links: 2 x 100 Gbit/s RoCE (IPU-M2000 datasheet) shared
    # by 4 IPUs, so ~6.25 GB/s per IPU; plus a fixed ~2 us round trip to start a transfer
    # (assumption, the order of a PCIe/RoCE DMA setup).
    host_bytes_per_second: float = 6.25e9
    host_latency_s: float = 2e-6
    # Largest single stream / remote transfer: 128 MiB. Source: Poplar DataStream docs.
    max_transfer_bytes: int = 128 * 1024 * 1024
    # 64-bit data path: 2 x float32 or 4 x float16 per vector op. Source: Louw 2021; poplibs.
    data_path_bytes: int = 8
    # Local memory: 6-cycle load latency, 16 B/cycle read, 8 B/cycle write per tile. Source: Jia et al. 2019.
    load_latency_cycles: int = 6
    memory_read_bytes_per_cycle: int = 16
    memory_write_bytes_per_cycle: int = 8
    # Peak AMP arithmetic per tile-cycle: vendor peaks 250 TFLOPS half / 62.5 TFLOPS float over
    # 1472 tiles at 1.33 GHz = 128 / 32 FLOP per tile-cycle (GC2: 64 / 16). DESIGN.md section 6.
    peak_flops_per_cycle_half: int = 128
    peak_flops_per_cycle_float: int = 32
    # Every tensor piece is placed at an 8-byte aligned address (64-bit loads need it).
    alignment: int = 8
    # Stack reserved on every tile: the supervisor's plus one per worker. Poplar's default worker
    # stack is small; we reserve 6 x 48 + 128 bytes (assumption: Poplar default "stack size" order).
    stack_bytes_per_tile: int = 6 * 48 + 128
    # Streaming memory (remote buffers, code loaded from streaming memory): DDR4 DIMMs behind the
    # IPU-Gateway of an IPU-M2000 (IPU-M2000 datasheet: up to 448 GB Streaming Memory). Each IPU
    # reaches the gateway over one PCIe Gen4 x8 link (IPU-M2000 block diagram, BMC User Guide
    # fig. 2.1): 16 GT/s x 8 lanes = 128 Gbit/s, the same link rate poplibs gives an IPU-Link, at
    # the same 0.85 efficiency (poplibs test util) = 13.6 GB/s per IPU. Assumptions: each IPU has
    # that link to itself (contention between the 4 IPUs for the gateway's DDR is not modelled),
    # and a transfer pays a fixed ~1 us to start (a PCIe round trip through the gateway to DDR).
    remote_bytes_per_second: float = 128e9 / 8 * 0.85
    remote_latency_s: float = 1e-6

    @property
    def num_tiles(self) -> int:
        """Tiles of one replica (all its IPUs)."""
        return self.tiles_per_ipu * self.ipus

    @property
    def clock_ghz(self) -> float:
        return self.clock_hz / 1e9

    def ipu_of_tile(self, tile):
        return tile // self.tiles_per_ipu

    def inter_ipu_sync_cycles(self) -> int:
        """ceil(15 ns x f x (1 + nIPUs/4) x 2). Source: poplibs test IPU model."""
        return int(math.ceil(self.inter_ipu_sync_ns * 1e-9 * self.clock_hz * (1 + self.ipus / 4) * 2))

    def ipu_link_bytes_per_cycle(self) -> float:
        """Bytes per cycle over one IPU-Link: 128 Gbit/s x 0.85 / clock."""
        return self.ipu_link_gbps * 1e9 / 8 * self.ipu_link_efficiency / self.clock_hz

    def host_bytes_per_cycle(self) -> float:
        return self.host_bytes_per_second / self.clock_hz

    def host_latency_cycles(self) -> int:
        return int(round(self.host_latency_s * self.clock_hz))

    def remote_bytes_per_cycle(self) -> float:
        """Streaming-memory bytes per tile-clock cycle over one IPU's gateway link."""
        return self.remote_bytes_per_second / self.clock_hz

    def remote_latency_cycles(self) -> int:
        return int(round(self.remote_latency_s * self.clock_hz))

    def cycles_to_seconds(self, cycles: int) -> float:
        return cycles / self.clock_hz

    def with_ipus(self, ipus: int) -> "Target":
        return replace(self, ipus=ipus)


GC200 = Target(name="GC200", tiles_per_ipu=1472, bytes_per_tile=638_976, clock_hz=1.33e9)

# The Bow IPU: the GC200's tiles, memory and AMP at 1.85 GHz (wafer-on-wafer power delivery), in a
# Bow-2000 of 4 IPUs wired as the IPU-M2000 (Bow-2000 datasheet: same IPU-Links and IPU-Gateway).
BOW = Target(name="Bow", tiles_per_ipu=1472, bytes_per_tile=638_976, clock_hz=1.85e9)

# The C600 PCIe card: one Mk2 IPU with float8 (codelets/matmul_float8.py: 560 TFLOPS float8, 280
# float16 = 1472 x 128 FLOP x 1.486 GHz), 4 IPU-Links, cards joined in pairs by cables of 2 links
# (C600 product brief). The host link is the card's PCIe Gen4 x16: 16 GT/s x 16 lanes = 32 GB/s
# each way before protocol overhead, at the IPU-Link's 0.85 efficiency (assumption) 27.2 GB/s.
C600 = Target(name="C600", tiles_per_ipu=1472, bytes_per_tile=638_976, clock_hz=280e12 / (1472 * 128),
              ipu_links=4, ipu_link_wiring="ring", ipu_links_per_cable=2,
              host_bytes_per_second=16e9 * 16 / 8 * 0.85)

GC2 = Target(
    name="GC2",
    tiles_per_ipu=1216,
    bytes_per_tile=262_144,
    clock_hz=1.6e9,
    peak_flops_per_cycle_half=64,
    peak_flops_per_cycle_float=16,
    tiles_per_shared_exchange_bus=1,
)


def small_target(tiles: int = 4, bytes_per_tile: int = 638_976, name: str | None = None) -> Target:
    """A GC200 with only a few tiles: the same costs per tile, for fast tests."""
    return replace(GC200, name=name or f"GC200-{tiles}tiles", tiles_per_ipu=tiles, bytes_per_tile=bytes_per_tile)


_NAMED = {"gc200": GC200, "mk2": GC200, "m2000": GC200, "bow": BOW, "bow2000": BOW, "bow-2000": BOW,
          "c600": C600, "gc2": GC2, "mk1": GC2}


def get_target(name: str | None = None) -> Target:
    """A target by name: 'GC200' / 'mk2', 'Bow', 'C600', 'GC2' / 'mk1', or 'small:N' for N tiles.

    With no name, the IPU_SIM_TARGET environment variable decides, else GC200.
    """
    name = name or env.target_name() or "GC200"
    key = name.strip().lower()
    if key in _NAMED:
        return _NAMED[key]
    if key.startswith("small"):
        _, _, n = key.partition(":")
        try:
            return small_target(int(n) if n else 4)
        except ValueError:
            pass
    raise ValueError(
        f"Unknown IPU target {name!r}. Choose 'GC200' (Mk2 in an IPU-M2000, default), 'Bow' (Bow-2000, "
        f"1.85 GHz), 'C600' (Mk2 PCIe card with float8), 'GC2' (Mk1) or 'small:N' (a GC200 with N tiles)."
    )
