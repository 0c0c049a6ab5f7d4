"""ConvPartialHorizontalMac / ConvPartialVerticalMac: kernels against their NumPy references and a
float64 convolution over awkward sub-fields; the work lists; the poplin estimators."""
import numpy as np
import pytest

import ipu
from codelets import conv as C

# (batch, groups, out chans, in chans, window (H, W), out rows [lo, hi), kernel, strides, dilations, pads)
CASES = [
    (1, 1, 1, 1, (5, 7), (0, 5), (3, 3), (1, 1), (1, 1), (1, 1)),  # depthwise, same padding
    (1, 3, 1, 1, (9, 6), (1, 4), (3, 3), (2, 2), (1, 1), (1, 1)),  # a band of rows, stride 2
    (2, 2, 3, 2, (6, 5), (0, 4), (2, 3), (1, 2), (2, 1), (0, 1)),  # grouped, non-square, dilated
    (1, 1, 1, 1, (1, 13), (0, 1), (1, 5), (1, 1), (1, 1), (0, 2)),  # one row
    (1, 4, 1, 1, (7, 7), (6, 7), (5, 5), (1, 1), (1, 1), (2, 2)),  # the last row: most of it padding
]


def _window(case):
    """The input rows the output rows read: (global start, count) of the window, and the sizes."""
    batch, ncg, nog, nig, image, (r0, r1), kernel, strides, dil, pads = case
    out_w = (image[1] + 2 * pads[1] - dil[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    lo = max(0, r0 * strides[0] - pads[0])
    hi = min(image[0], (r1 - 1) * strides[0] - pads[0] + (kernel[0] - 1) * dil[0] + 1)
    return lo, hi - lo, out_w


def _direct(x, w, case, lo):
    """float64: out[b, cg, og, r, j] over the window x[b, cg, ig, rows, cols] (zero padded)."""
    batch, ncg, nog, nig, image, (r0, r1), kernel, strides, dil, pads = case
    _, _, out_w = _window(case)
    out = np.zeros((batch, ncg, nog, r1 - r0, out_w))
    for r in range(r0, r1):
        for j in range(out_w):
            for ky in range(kernel[0]):
                for kx in range(kernel[1]):
                    iy = r * strides[0] - pads[0] + ky * dil[0]
                    ix = j * strides[1] - pads[1] + kx * dil[1]
                    if 0 <= iy < image[0] and 0 <= ix < image[1]:
                        v = x[:, :, :, iy - lo, ix]  # (b, cg, ig)
                        out[:, :, :, r - r0, j] += np.einsum("bci,coi->bco", v, w[:, :, :, ky, kx])
    return out


def _worklists(make, case):
    """The case's input window and the worklists `make` (hmac_worklists / vmac_worklists) builds for
    it: (lo, rows, out_w, lists, entries, packed table)."""
    batch, ncg, nog, nig, image, (r0, r1), kernel, strides, dil, pads = case
    lo, rows, out_w = _window(case)
    lists, ent = make(batch, (r0, 0), (r1, out_w), (lo, 0), (rows, image[1]), kernel, strides, dil, pads, image)
    return lo, rows, out_w, lists, ent, C.pack_worklists(lists, ent)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_hmac_matches_reference_and_convolution(case, dtype, rng, cl):
    batch, ncg, nog, nig, image, (r0, r1), kernel, strides, dil, pads = case
    lo, rows, out_w, lists, ent, table = _worklists(C.hmac_worklists, case)
    x = rng.normal(size=(batch, ncg, nig, rows, image[1])).astype(dtype)
    w = rng.normal(size=(ncg, nog, nig) + kernel).astype(dtype)
    K = int(np.prod(kernel))
    inblk, outblk = batch * rows * image[1], batch * (r1 - r0) * out_w
    # the vertex's blocks: in [cg][ig][batch][field], out [cg][og][batch][field]
    xin = x.transpose(1, 2, 0, 3, 4).reshape(-1)
    e, s = C.worker_summary(lists, ent, 1)
    params = {"conv_groups": ncg, "out_groups": nog, "in_groups": nig, "kernel_size": K, "in_block": inblk,
              "out_block": outblk, "in_stride": strides[1], "out_stride": 1,
              **{f"entries{i}": e[i] for i in range(6)}, **{f"positions{i}": s[i] for i in range(6)}}
    run = cl.run_vertex("ConvPartialHorizontalMac", {"in": xin, "weights": w.reshape(-1),
                                                     "worklists": table.astype(C.list_dtype(table).numpy),
                                                     "out": np.zeros(ncg * nog * outblk, np.float32)}, params)
    shape = (ncg, nog, nig, K, inblk, outblk, strides[1], 1)
    ref = C.hmac_reference(xin, w.reshape(-1), table, shape, ncg * nog * outblk)
    np.testing.assert_array_equal(run.out["out"], ref)
    want = _direct(x.astype(np.float64), w.astype(np.float64), case, lo)  # (b, cg, og, r, j)
    np.testing.assert_allclose(run.out["out"].reshape(ncg, nog, batch, r1 - r0, out_w),
                               want.transpose(1, 2, 0, 3, 4), rtol=1e-5, atol=1e-5)
    assert run.cycles > 0


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vmac_matches_reference_and_weight_gradient(case, dtype, rng, cl):
    batch, ncg, nog, nig, image, (r0, r1), kernel, strides, dil, pads = case
    lo, rows, out_w, lists, ent, table = _worklists(C.vmac_worklists, case)
    x = rng.normal(size=(ncg, nig, batch, rows, image[1])).astype(dtype)
    dy = rng.normal(size=(ncg, nog, batch, r1 - r0, out_w)).astype(dtype)
    K = int(np.prod(kernel))
    inblk, gblk = batch * rows * image[1], batch * (r1 - r0) * out_w
    e, s, one = C.worker_summary(lists, ent, 3, singles=True)
    params = {"conv_groups": ncg, "out_chans": nog, "in_chans": nig, "kernel_size": K, "in_block": inblk,
              "grad_block": gblk, "in_stride": strides[1], **{f"entries{i}": e[i] for i in range(6)},
              **{f"positions{i}": s[i] for i in range(6)}, **{f"singles{i}": one[i] for i in range(6)}}
    run = cl.run_vertex("ConvPartialVerticalMac", {"in": x.reshape(-1), "weights": dy.reshape(-1),
                                                   "worklists": table.astype(C.list_dtype(table).numpy),
                                                   "out": np.zeros(ncg * nog * nig * K, np.float32)}, params)
    ref = C.vmac_reference(x.reshape(-1), dy.reshape(-1), table, (ncg, nog, nig, K, inblk, gblk, strides[1]))
    np.testing.assert_array_equal(run.out["out"], ref)
    # float64: dW[cg, og, ig, k] = sum over b and outputs of dy x the input that output reads at k
    want = np.zeros((ncg, nog, nig) + kernel)
    xd, dyd = x.astype(np.float64), dy.astype(np.float64)
    for r in range(r0, r1):
        for j in range(out_w):
            for ky in range(kernel[0]):
                for kx in range(kernel[1]):
                    iy = r * strides[0] - pads[0] + ky * dil[0]
                    ix = j * strides[1] - pads[1] + kx * dil[1]
                    if 0 <= iy < image[0] and 0 <= ix < image[1]:
                        want[:, :, :, ky, kx] += np.einsum("cib,cob->coi", xd[:, :, :, iy - lo, ix],
                                                           dyd[:, :, :, r - r0, j])
    np.testing.assert_allclose(run.out["out"].reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def test_partition_rows_gives_equal_shares():
    for rows in (1, 2, 3, 4, 5, 7, 12, 13):
        parts = C.partition_rows(rows)
        share = [sum((se - sb) / sf for _, sb, se, sf in p) for p in parts]
        assert np.allclose(share, rows / 6)
        covered = {}
        for p in parts:
            for r, sb, se, sf in p:
                covered[r] = covered.get(r, 0) + (se - sb)
                assert sf == 6 // np.gcd(6, rows)
        assert covered == {r: 6 // np.gcd(6, rows) for r in range(rows)}


def test_worklists_cover_the_valid_outputs_once_per_kernel_position():
    # a 4x4 image, 3x3 kernel, same padding: kernel position (ky, kx) reaches the image from
    # (4 - |ky - 1|) x (4 - |kx - 1|) outputs
    lists, ent = C.hmac_worklists(1, (0, 0), (4, 4), (0, 0), (4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (4, 4))
    for k, (ky, kx) in enumerate(np.ndindex(3, 3)):
        idx = [i for lst in lists[k * 6:(k + 1) * 6] for i in lst]
        assert int(ent[idx, 1].sum()) == (4 - abs(ky - 1)) * (4 - abs(kx - 1))
        outs = [o for i in idx for o in range(ent[i, 0], ent[i, 0] + ent[i, 1])]
        assert len(outs) == len(set(outs))


# poplin's HMAC estimate worked by hand (PerformanceEstimation.hpp, float, one channel per group):
# one conv group, one output group, 9 kernel positions, each worker 9 entries of 2 positions,
# zerosInfo 72: zero = (ceil(12 / 2) + 14 - 9) x 6 x 1 = 66; worker = 16 + 9 x 16 + 9 x (19 + 2 x 17) = 637;
# cycles = 66 + 58 + 54 + 1 x (23 + 1 x (15 + 1 x (10 + 6 x 637)))
def test_hmac_estimate_by_hand():
    got = C.hmac_cycles([1], [1], [1], [9], [72], [[9] * 6], [[18] * 6], True)
    assert int(got[0]) == 66 + 58 + 54 + 23 + 15 + 10 + 6 * 637


def test_vmac_estimate_by_hand():
    # 2 (float) groups side by side; worker: 19 + 3 entries x 15 + 2 x (12 - 6) = 76; K = 9:
    # zero = 4 + 9, reduction = 9 + 19 x 3 // 2 = 37; cycles = 76 + 1 x (13 + 32 + 24 + 6 x 76 + 37)
    got = C.vmac_cycles([2], [9], [[3] * 6], [[12] * 6], True)
    assert int(got[0]) == 76 + 13 + 32 + 24 + 6 * 76 + 37


def test_state_grows_with_regions_not_field(cl):
    hmac = ipu.get_codelet("ConvPartialHorizontalMac")
    ip = np.zeros((2, 20), np.int64)
    ip[:, :4] = [[1, 1, 1, 9], [4, 1, 1, 9]]
    cnt = np.zeros((2, 4), np.int64)
    st = hmac.vertex_state_bytes(None, cnt, ip) + hmac.region_state(None, cnt, ip)  # a one-row vertex
    assert st[1] - st[0] == 2 * 3 * 3  # three more conv groups: an in, an out and a weights pointer each
    # a further batch element (row) adds its in and out regions' pointers only
    assert list(hmac.region_state(None, cnt, ip)) == [2 * 2, 2 * 2 * 4]
