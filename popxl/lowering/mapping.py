"""Where new tensors live: the tile-mapping policy of the lowering.

Large tensors are spread linearly over the tiles in 64-bit grains with at least
`MIN_BYTES_PER_TILE` on each tile used (as poputil::mapTensorLinearly does with a minimum per
tile); small ones are kept whole on one tile, and successive small tensors go to successive tiles
so that they do not all pile up on tile 0; a tensor spread over fewer than all the tiles starts
where the previous such one ended.
"""
from __future__ import annotations

import numpy as np

import ipu

# A tile's share of a spread tensor is at least this many bytes: below it the exchange and vertex
# overheads outweigh the parallelism (Poplar's linear mapping uses a similar minimum per tile).
MIN_BYTES_PER_TILE = 256


class TileAllocator:
    def __init__(self, target: ipu.Target):
        self.target = target
        self._next_small = 0

    def take_small_tiles(self, used: int) -> int:
        """The tile where the next small layout starts; the following one starts `used` tiles on
        (successive small layouts go to successive tiles)."""
        start = self._next_small % self.target.num_tiles
        self._next_small = start + max(used, 1)
        return start

    def map(self, g: ipu.Graph, v: ipu.Variable) -> None:
        n = v.numel
        if n == 0:
            return
        isz = v.dtype.itemsize
        if n * isz <= MIN_BYTES_PER_TILE or self.target.num_tiles == 1:
            g.set_tile_mapping(v, self._next_small % self.target.num_tiles)
            self._next_small += 1
            return
        grain = max(1, self.target.data_path_bytes // isz)
        min_elems = max(grain, MIN_BYTES_PER_TILE // isz)
        T = self.target.num_tiles
        # a tensor too small to reach every tile starts where the last such one ended (as small ones
        # do), so that the per-channel vectors of a CNN's normalisations do not all pile up, with
        # the small ops that use them, on the first tiles
        chunk = max(-(-n // T), min_elems)
        chunk = -(-chunk // grain) * grain
        used = -(-n // chunk)
        if used < T:
            tiles: range | np.ndarray | None = (self.take_small_tiles(used) + np.arange(T)) % T
        else:
            # over this allocator's tiles (one IPU of a multi-IPU replica: lowering/placement.py)
            tiles = range(T) if g.target.num_tiles != T else None
        g.map_linearly(v, grain=grain, min_elements_per_tile=min_elems, tiles=tiles)
