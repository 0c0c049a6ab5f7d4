"""ipu.IndexBlocks: an index kept block by block (a start and strides per block), what a variable
laid out by its consumer is viewed through (popxl/lowering/creators.py). Checked against the
element-by-element index it stands for: expansion, gathers and scatters, inverse, transposes and
reshapes of views, and host reads and writes through ipu.Engine."""
import numpy as np
import pytest

import ipu
from ipu.tensor import IndexBlocks


def _blocked_permutation(shape, row_split, col_split, transposed):
    """A view of `shape` (rows, cols) whose storage holds its blocks one after another, each
    row-major, or row-major in the transposed block (a transposed weight): the IndexBlocks and the
    same index element by element."""
    R, C = shape
    rows = np.array_split(np.arange(R), row_split)
    cols = np.array_split(np.arange(C), col_split)
    e0, es, p0, ps, box = [], [], [], [], []
    index = np.empty(R * C, np.int64)
    p = 0
    for rr in rows:
        for cc in cols:
            if rr.size == 0 or cc.size == 0:
                continue
            if transposed:  # storage holds the block [c, r] row-major: a view row steps by the block's rows
                e0.append(rr[0] * C + cc[0])
                es.append((1, C))
                box.append((cc.size, rr.size))
                ps.append((rr.size, 1))
                index[(rr[None, :] * C + cc[:, None]).reshape(-1)] = p + np.arange(rr.size * cc.size)
            else:
                e0.append(rr[0] * C + cc[0])
                es.append((C, 1))
                box.append((rr.size, cc.size))
                ps.append((cc.size, 1))
                index[(rr[:, None] * C + cc[None, :]).reshape(-1)] = p + np.arange(rr.size * cc.size)
            p0.append(p)
            p += rr.size * cc.size
    return IndexBlocks(e0, es, p0, ps, box), index


CASES = [((1, 1), 1, 1), ((7, 13), 2, 3), ((37, 29), 5, 4), ((1, 300), 1, 7), ((130, 3), 11, 2), ((64, 48), 4, 16)]


@pytest.mark.parametrize("shape, rs, cs", CASES)
@pytest.mark.parametrize("transposed", [False, True])
def test_expand_gather_scatter_inverse_match_the_index(shape, rs, cs, transposed):
    blocks, index = _blocked_permutation(shape, rs, cs, transposed)
    np.testing.assert_array_equal(blocks.expand(), index)
    src = np.random.default_rng(0).normal(size=index.size).astype(np.float32)
    np.testing.assert_array_equal(blocks.gather(src), src[index])
    out = np.zeros_like(src)
    blocks.scatter(src, out)
    want = np.zeros_like(src)
    want[index] = src
    np.testing.assert_array_equal(out, want)
    inv = np.empty_like(index)
    inv[index] = np.arange(index.size)
    np.testing.assert_array_equal(blocks.inverse().expand(), inv)
    assert blocks.nbytes < 64 * (blocks.e0.size + 1)  # grows with the blocks, not the elements


@pytest.mark.parametrize("shape, rs, cs", CASES)
@pytest.mark.parametrize("transposed", [False, True])
def test_views_of_a_blocked_index(shape, rs, cs, transposed):
    blocks, index = _blocked_permutation(shape, rs, cs, transposed)
    g = ipu.Graph(ipu.small_target(4))
    var = g.add_variable("w", (index.size,), "float32")
    view = ipu.Tensor(var, blocks, shape)
    ref = index.reshape(shape)
    t = view.transpose()
    assert t.blocks is not None  # a transpose renumbers the blocks' positions, nothing expands
    np.testing.assert_array_equal(t.index(), ref.T)
    np.testing.assert_array_equal(t.transpose(1, 0).index(), ref)
    np.testing.assert_array_equal(view.reshape(-1).index(), ref.reshape(-1))
    r3 = view.reshape(shape[0], 1, shape[1])
    np.testing.assert_array_equal(r3.transpose(2, 0, 1).index(), ref.reshape(shape[0], 1, shape[1]).transpose(2, 0, 1))
    np.testing.assert_array_equal(view[1:, ::2].index(), ref[1:, ::2])  # other views expand
    starts, lengths = view.index_runs()
    np.testing.assert_array_equal(ipu.tensor.IndexRuns(starts, lengths).expand(), index)
    want = (0, index.size) if np.array_equal(index, np.arange(index.size)) else None
    assert view.contiguous_range() == want


def test_a_transpose_that_would_carry_across_an_axis_expands():
    """A block running across rows of the view's shape cannot be renumbered axis by axis."""
    blocks = IndexBlocks([0], [[1]], [0], [[1]], [[12]])  # the identity over 12 positions, one block
    g = ipu.Graph(ipu.small_target(2))
    var = g.add_variable("v", (12,), "float32")
    view = ipu.Tensor(var, blocks, (3, 4))
    t = view.transpose()
    assert t.blocks is None
    np.testing.assert_array_equal(t.index(), np.arange(12).reshape(3, 4).T)
    assert view.contiguous_range() == (0, 12)


@pytest.mark.parametrize("transposed", [False, True])
def test_engine_reads_and_writes_a_blocked_view_in_place(transposed):
    """Host transfers of a view kept as IndexBlocks go block by block to and from tile memory."""
    shape = (37, 29)
    blocks, index = _blocked_permutation(shape, 5, 4, transposed)
    g = ipu.Graph(ipu.small_target(5))
    var = g.add_variable("w", (index.size,), "float32")
    sizes = blocks.box.prod(axis=1)
    var.set_tile_runs(np.arange(sizes.size) % 5, sizes)
    other = g.add_variable("o", (index.size,), "float32")
    g.map_linearly(other)
    exe = ipu.compile(g, ipu.Copy(var, other))
    engine = ipu.Engine(exe)
    view = ipu.Tensor(var, blocks, shape)
    assert engine._blocks_in_memory(view, 0) is not None  # straight to tile memory
    data = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    engine.write_tensor(view, data)
    stored = engine.read_tensor(var).reshape(-1)
    want = np.empty(index.size, np.float32)
    want[index] = data.reshape(-1)
    np.testing.assert_array_equal(stored, want)
    np.testing.assert_array_equal(engine.read_tensor(view), data)
    engine.run()
    np.testing.assert_array_equal(engine.read_tensor(other).reshape(-1), want)
