"""Random vertices: RandomUniform, RandomNormal, Dropout and ModifySeed.

The generator is counter based, so results depend only on the seed and on each element's index
in the whole tensor, never on how the tensor is spread over tiles or vertices:

    key  = seed[0] << 32 | seed[1]                    (the (2,) uint32 seed tensor)
    bits = mix64(key ^ mix64(index * G + C))          64 random bits for element `index`

with mix64 the splitmix64 / murmur3 finaliser (two xor-shift-multiply rounds; G the 64-bit golden
ratio, C an odd constant). A vertex receives its seed copy, the global index of its first element
(`first`) and its run of elements.

- uniform: u = (bits >> 40) / 2**24 in [0, 1) (24 bits, a float's mantissa); low + (high - low) u.
- normal: Box-Muller on two 24-bit uniforms of the same bits, u1 = ((bits >> 40) + 1) / 2**24 in
  (0, 1] and u2 = ((bits >> 16) & 0xffffff) / 2**24: mean + std sqrt(-2 ln u1) cos(2 pi u2).
- dropout: keep element i when its uniform u >= ratio (probability 1 - ratio), scaled by `scale`
  (1 / (1 - ratio)); dropped elements are 0.
- ModifySeed: PopART's ModifyRandomSeed, [L, R] -> [L, randint(R + modifier)] with the randint
  the top 31 bits of bits(key = L << 32 | (R + modifier), index 0).

The IPU draws from per-tile hardware generators instead (poprand); those streams depend on the
tile mapping, which a simulator that must not depend on it cannot reproduce. Costs are poprand's.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field, load, store

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_G = np.uint64(0x9E3779B97F4A7C15)
_C = np.uint64(0xD1B54A32D192ED03)
_TWO_M24 = 1.0 / (1 << 24)
_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)
_SEED = (ipu.UINT32,)


@njit(cache=True)
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _bits(key, index):
    return _mix64(key ^ _mix64(np.uint64(index) * _G + _C))


@njit(cache=True)
def _key(seed, i):
    return (np.uint64(seed[i]) << np.uint64(32)) | np.uint64(seed[i + 1])


@njit(cache=True)
def _uniform(views, off, cnt, fp, ip):
    seed = views[UNI_F.seed]
    out = views[UNI_F.out]
    for v in range(off.shape[0]):
        key = _key(seed, off[v, UNI_F.seed])
        low = fp[v, UNI_FP.low]
        span = fp[v, UNI_FP.high] - fp[v, UNI_FP.low]
        first = ip[v, UNI_IP.first]
        o0 = off[v, UNI_F.out]
        for i in range(cnt[v, UNI_F.out]):
            b = _bits(key, first + i)
            u = np.float64(b >> np.uint64(40)) * _TWO_M24
            store(out, o0 + i, low + span * u)


@njit(cache=True)
def _normal(views, off, cnt, fp, ip):
    seed = views[NORM_F.seed]
    out = views[NORM_F.out]
    for v in range(off.shape[0]):
        key = _key(seed, off[v, NORM_F.seed])
        mean = fp[v, NORM_FP.mean]
        std = fp[v, NORM_FP.std]
        first = ip[v, NORM_IP.first]
        o0 = off[v, NORM_F.out]
        for i in range(cnt[v, NORM_F.out]):
            b = _bits(key, first + i)
            u1 = (np.float64(b >> np.uint64(40)) + 1.0) * _TWO_M24
            u2 = np.float64((b >> np.uint64(16)) & np.uint64(0xFFFFFF)) * _TWO_M24
            z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
            store(out, o0 + i, mean + std * z)


@njit(cache=True)
def _dropout(views, off, cnt, fp, ip):
    seed = views[DROP_F.seed]
    x = views[DROP_F.in_]
    out = views[DROP_F.out]
    for v in range(off.shape[0]):
        key = _key(seed, off[v, DROP_F.seed])
        ratio = fp[v, DROP_FP.ratio]
        scale = np.float32(fp[v, DROP_FP.scale])
        first = ip[v, DROP_IP.first]
        x0 = off[v, DROP_F.in_]
        o0 = off[v, DROP_F.out]
        for i in range(cnt[v, DROP_F.out]):
            b = _bits(key, first + i)
            u = np.float64(b >> np.uint64(40)) * _TWO_M24
            if u < ratio:
                store(out, o0 + i, np.float32(0.0))
            else:
                store(out, o0 + i, np.float32(load(x, x0 + i)) * scale)


@njit(cache=True)
def _modify_seed(views, off, cnt, fp, ip):
    seed = views[MOD_F.seed]
    mod = views[MOD_F.modifier]
    out = views[MOD_F.out]
    for v in range(off.shape[0]):
        s0 = off[v, MOD_F.seed]
        left = np.uint64(seed[s0])
        m = np.uint64(np.int64(load(mod, off[v, MOD_F.modifier])) & 0xFFFFFFFF)
        right = (np.uint64(seed[s0 + 1]) + m) & np.uint64(0xFFFFFFFF)
        b = _bits((left << np.uint64(32)) | right, 0)
        out[off[v, MOD_F.out]] = np.uint32(left)
        out[off[v, MOD_F.out] + 1] = np.uint32(b >> np.uint64(33))


# -- NumPy references (the same arithmetic, vectorised) -----------------------------------------


def _np_mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def random_bits(seed, index) -> np.ndarray:
    """The 64 random bits of elements `index` (an int array) under a (2,) uint32 seed."""
    seed = np.asarray(seed, np.uint32).reshape(2)
    key = (np.uint64(seed[0]) << np.uint64(32)) | np.uint64(seed[1])
    with np.errstate(over="ignore"):
        return _np_mix64(key ^ _np_mix64(np.asarray(index, np.uint64) * _G + _C))


def uniform_reference(seed, n, low=0.0, high=1.0, dtype=np.float32, first=0):
    b = random_bits(seed, np.arange(first, first + n))
    u = (b >> np.uint64(40)).astype(np.float64) * _TWO_M24
    return (low + (high - low) * u).astype(dtype)


def normal_reference(seed, n, mean=0.0, std=1.0, dtype=np.float32, first=0):
    b = random_bits(seed, np.arange(first, first + n))
    u1 = ((b >> np.uint64(40)).astype(np.float64) + 1.0) * _TWO_M24
    u2 = ((b >> np.uint64(16)) & np.uint64(0xFFFFFF)).astype(np.float64) * _TWO_M24
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    return (mean + std * z).astype(dtype)


def dropout_reference(seed, x, ratio, scale=None, first=0):
    x = np.asarray(x)
    scale = 1.0 / (1.0 - ratio) if scale is None else scale
    b = random_bits(seed, np.arange(first, first + x.size))
    u = (b >> np.uint64(40)).astype(np.float64) * _TWO_M24
    keep = (u >= ratio).reshape(x.shape)
    kept = (x.astype(np.float32) * np.float32(scale)).astype(x.dtype)
    return np.where(keep, kept, np.zeros((), x.dtype))


def modify_seed_reference(seed, modifier):
    seed = np.asarray(seed, np.uint32).reshape(2)
    right = (int(seed[1]) + (int(modifier) & 0xFFFFFFFF)) & 0xFFFFFFFF
    b = random_bits(np.array([seed[0], right], np.uint32), np.array([0]))[0]
    return np.array([seed[0], int(b >> np.uint64(33))], np.uint32)


# -- cost models ----------------------------------------------------------------------------------


def _elems_per_vector(t) -> int:
    return 4 if t == ipu.FLOAT16 else 2


def uniform_cycles(n, t, workers=6) -> np.ndarray:
    """Tile cycles of a RandomUniform supervisor vertex over n elements.

    Source: poplibs poprandCycleEstimators.cpp, UniformSupervisor (float / half): 4 supervisor
    cycles + 4 x (n + w - 1) / w + 22 (float) or 24 (half) per worker + a remainder of 4 (float)
    or 12 (half) cycles when n is not a whole number of vectors. poplibs computes w as
    dataPathWidth / 2 or / 4 (32 / 16, a units slip); we use the elements per 64-bit vector, 2 for
    float and 4 for half, as its NormalSupervisor estimate does.
    """
    n = np.asarray(n, np.int64)
    w = _elems_per_vector(t)
    tail = (n % w != 0)
    if t == ipu.FLOAT32:
        return 4 + (4 * (n + w - 1)) // w + 22 * workers + tail * 4
    return 4 + (4 * (n + w - 1)) // w + 24 * workers + tail * 12


def normal_cycles(n, t, workers=6) -> np.ndarray:
    """Source: poplibs poprandCycleEstimators.cpp, NormalSupervisor: 4 + 4 x (n + w - 1) / w +
    22 (float) / 24 (half) per worker + a remainder of 3 (float) / 12 (half)."""
    n = np.asarray(n, np.int64)
    w = _elems_per_vector(t)
    tail = (n % w != 0)
    if t == ipu.FLOAT32:
        return 4 + (4 * (n + w - 1)) // w + 22 * workers + tail * 3
    return 4 + (4 * (n + w - 1)) // w + 24 * workers + tail * 12


def dropout_cycles(n, t, workers=6) -> np.ndarray:
    """Source: poplibs poprandCycleEstimators.cpp, DropoutSupervisor: 6 + 24 per worker +
    2 x (n + w - 1) / w + a remainder of 1 (float) / 9 (half)."""
    n = np.asarray(n, np.int64)
    w = _elems_per_vector(t)
    tail = (n % w != 0)
    return 6 + 24 * workers + (2 * (n + w - 1)) // w + tail * (1 if t == ipu.FLOAT32 else 9)


def modify_seed_cycles(workers=6) -> int:
    """PopART's ModifyRandomSeed is popops::add(R, modifier) then a one-element poprand uniform of
    INT type: UniformSupervisor INT with scale != 0 for one element, 4 + 22 per worker +
    6 x (1 / 2) + (1 % 2) x 2 (poplibs poprandCycleEstimators.cpp), plus 10 cycles for the add and
    the copy of L (derivation: a few loads and stores)."""
    return 4 + 22 * workers + 2 + 10


# -- codelets -------------------------------------------------------------------------------------


class _Random(Codelet):
    supervisor = True

    def code_bytes(self, types):
        return 384  # assumption: a poprand supervisor + worker assembly pair (~0.4 KiB)


@ipu.register
class RandomUniform(_Random):
    name = "RandomUniform"
    fields = (Field("seed", IN), Field("out", OUT))
    float_params = ("low", "high")
    int_params = ("first",)
    allowed_types = (_SEED, _FLOATS)

    def kernel(self):
        return _uniform

    def check(self, types, cnt, fp, ip):
        if np.any(self.table(types, cnt).count.seed != 2):
            raise ValueError("RandomUniform: the seed field holds 2 uint32")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt)
        return uniform_cycles(t.count.out, t.type.out, target.worker_contexts)

    def reference(self, seed, n, low=0.0, high=1.0, dtype=np.float32, first=0):
        return uniform_reference(seed, n, low, high, dtype, first)


@ipu.register
class RandomNormal(_Random):
    name = "RandomNormal"
    fields = (Field("seed", IN), Field("out", OUT))
    float_params = ("mean", "std")
    int_params = ("first",)
    allowed_types = (_SEED, _FLOATS)
    poplibs_vertices = ("poprand::NormalSupervisor",)

    def kernel(self):
        return _normal

    def check(self, types, cnt, fp, ip):
        if np.any(self.table(types, cnt).count.seed != 2):
            raise ValueError("RandomNormal: the seed field holds 2 uint32")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt)
        return normal_cycles(t.count.out, t.type.out, target.worker_contexts)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        return ipu.Vertex({"seed": ipu.UINT32, "out": t}, {"seed": 2, "out": n}, {"mean": 0.0, "std": 1.0, "first": 0})

    def reference(self, seed, n, mean=0.0, std=1.0, dtype=np.float32, first=0):
        return normal_reference(seed, n, mean, std, dtype, first)


@ipu.register
class Dropout(_Random):
    name = "Dropout"
    fields = (Field("seed", IN), Field("in", IN), Field("out", OUT))
    float_params = ("ratio", "scale")
    int_params = ("first",)
    allowed_types = (_SEED, _FLOATS, _FLOATS)
    poplibs_vertices = ("poprand::DropoutSupervisor",)

    def kernel(self):
        return _dropout

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt)
        if t.type.in_ != t.type.out:
            raise TypeError(f"Dropout: in is {t.type.in_.name} but out is {t.type.out.name}")
        if np.any(t.count.seed != 2) or np.any(t.count.in_ != t.count.out):
            raise ValueError("Dropout: seed holds 2 uint32; in and out the same elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt)
        return dropout_cycles(t.count.out, t.type.out, target.worker_contexts)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        return ipu.Vertex({"seed": ipu.UINT32, "in": t, "out": t}, {"seed": 2, "in": n, "out": n},
                          {"ratio": 0.5, "scale": 2.0, "first": 0})

    def reference(self, seed, x, ratio, scale=None, first=0):
        return dropout_reference(seed, x, ratio, scale, first)


@ipu.register
class ModifySeed(_Random):
    name = "ModifySeed"
    fields = (Field("seed", IN), Field("modifier", IN), Field("out", OUT))
    allowed_types = (_SEED, (ipu.UINT32, ipu.INT32, ipu.UINT16, ipu.INT16, ipu.UINT8, ipu.INT8), _SEED)

    def kernel(self):
        return _modify_seed

    def check(self, types, cnt, fp, ip):
        c = self.table(types, cnt).count
        if np.any(c.seed != 2) or np.any(c.modifier != 1) or np.any(c.out != 2):
            raise ValueError("ModifySeed: seed (2), modifier (1) and out (2) elements")

    def cycles(self, types, cnt, fp, ip, target):
        return np.full(len(cnt), modify_seed_cycles(target.worker_contexts), np.int64)

    def code_bytes(self, types):
        return 192

    def reference(self, seed, modifier):
        return modify_seed_reference(seed, modifier)


# the kernels' columns, by name
UNI_F, UNI_FP, UNI_IP = RandomUniform.F, RandomUniform.FP, RandomUniform.IP
NORM_F, NORM_FP, NORM_IP = RandomNormal.F, RandomNormal.FP, RandomNormal.IP
DROP_F, DROP_FP, DROP_IP = Dropout.F, Dropout.FP, Dropout.IP
MOD_F = ModifySeed.F
