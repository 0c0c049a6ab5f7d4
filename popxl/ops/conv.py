"""Windowed ops on (N, C, *spatial) tensors: convolutions, pooling, interpolate and roi_align."""

from typing import List, Literal, Optional, Tuple

import numpy as np

from popxl.context import op_debug_context
from popxl.tensor import Tensor

from ._op_builder import single, not_a_tensor
from popxl import dtypes

from ._shapes import check_float, check_float8, check_log2_scale, check_same_dtype, int_tuple, window_output_shape

__all__ = ["conv", "conv_transpose", "conv_pow2scaled", "conv_transpose_pow2scaled", "multi_conv_options",
           "average_pool", "max_pool", "receptive_attributes", "interpolate", "roi_align", "PadType"]

PadType = Literal["not_set", "same_upper", "same_lower", "valid"]


def _spatial_args(op: str, t: Tensor, n: int, stride, padding, dilation):
    strides = int_tuple(stride if stride else (1,) * n, n, f"{op} stride")
    pads = int_tuple(padding if padding else (0,) * (2 * n), 2 * n, f"{op} padding")
    dilations = int_tuple(dilation if dilation else (1,) * n, n, f"{op} dilation")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations) or any(p < 0 for p in pads):
        raise ValueError(f"{op}: strides and dilations must be >= 1 and paddings >= 0.")
    return strides, pads, dilations


def _conv_inputs(op: str, t: Tensor, weight: Tensor, log2_scale=None) -> int:
    for name, x in (("t", t), ("weight", weight)):
        if not isinstance(x, Tensor):
            raise not_a_tensor(name, x, op)
    if op.endswith("_pow2scaled"):  # float8 operands (the formats may differ) and a scalar int32 scale
        check_float8(op, t, "t")
        check_float8(op, weight, "weight")
        check_log2_scale(op, log2_scale)
    else:
        check_float(op, t)
        check_same_dtype(op, t, weight)
    if t.rank < 3 or weight.rank != t.rank:
        raise ValueError(f"{op}: t must be (N, C, *spatial) and weight of the same rank; got {t.shape} "
                         f"and {weight.shape}.")
    return t.rank - 2


@op_debug_context
def conv(t: Tensor, weight: Tensor, stride: Optional[Tuple[int, ...]] = (1, 1),
         padding: Optional[Tuple[int, ...]] = (0, 0, 0, 0), dilation: Optional[Tuple[int, ...]] = (1, 1),
         groups: Optional[int] = 1, pad_type: Optional[PadType] = "not_set",
         available_memory_proportions: Optional[List[float]] = None, partials_types: Optional[List[str]] = None,
         enable_conv_dithering: Optional[List[int]] = None) -> Tensor:
    """Convolution of ``t`` (N, C, *spatial) with ``weight`` (M, C / groups, *kernel).

    ``padding`` lists the begin pads of each spatial axis, then the end pads.
    """
    return _conv("conv", t, weight, None, stride, padding, dilation, groups, pad_type,
                 available_memory_proportions, partials_types, enable_conv_dithering)


def _conv(op, t, weight, log2_scale, stride, padding, dilation, groups, pad_type, available_memory_proportions,
          partials_types, enable_conv_dithering):
    n = _conv_inputs(op, t, weight, log2_scale)
    strides, pads, dilations = _spatial_args(op, t, n, stride, padding, dilation)
    groups = int(groups or 1)
    if groups < 1 or t.shape[1] % groups or weight.shape[0] % groups:
        raise ValueError(f"conv: groups={groups} must divide the input channels {t.shape[1]} and the output "
                         f"channels {weight.shape[0]}.")
    if weight.shape[1] * groups != t.shape[1]:
        raise ValueError(f"conv: weight {weight.shape} expects {weight.shape[1] * groups} input channels, "
                         f"t {t.shape} has {t.shape[1]}.")
    kernel = weight.shape[2:]
    spatial, pads = window_output_shape(t.shape[2:], kernel, strides, pads, dilations, pad_type or "not_set",
                                        what="conv")
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "groups": groups,
             "pad_type": pad_type or "not_set", "available_memory_proportions": available_memory_proportions,
             "partials_types": partials_types, "enable_conv_dithering": enable_conv_dithering}
    return _record(op, t, weight, log2_scale, (t.shape[0], weight.shape[0]) + spatial, attrs)


def _record(op, t, weight, log2_scale, shape, attrs):
    if log2_scale is None:
        return single(op, [t, weight], shape, t.dtype, attrs, input_names=["t", "weight"])
    return single(op, [t, weight, log2_scale], shape, dtypes.float16, attrs,
                  input_names=["t", "weight", "log2_scale"])


@op_debug_context
def conv_transpose(t: Tensor, weight: Tensor, stride: Optional[Tuple[int, ...]] = (1, 1),
                   padding: Optional[Tuple[int, ...]] = (0, 0, 0, 0), dilation: Optional[Tuple[int, ...]] = (1, 1),
                   groups: Optional[int] = 1, pad_type: Optional[PadType] = "not_set",
                   output_padding: Optional[Tuple[int, ...]] = (), output_shape: Optional[Tuple[int, ...]] = (),
                   available_memory_proportions: Optional[List[float]] = None,
                   partials_types: Optional[List[str]] = None, enable_conv_dithering: Optional[List[int]] = None):
    """Transposed convolution of ``t`` (N, C, *spatial) with ``weight`` (C, M / groups, *kernel)."""
    return _conv_transpose("conv_transpose", t, weight, None, stride, padding, dilation, groups, pad_type,
                           output_padding, output_shape, available_memory_proportions, partials_types,
                           enable_conv_dithering)


def _conv_transpose(op, t, weight, log2_scale, stride, padding, dilation, groups, pad_type, output_padding,
                    output_shape, available_memory_proportions, partials_types, enable_conv_dithering):
    n = _conv_inputs(op, t, weight, log2_scale)
    strides, pads, dilations = _spatial_args(op, t, n, stride, padding, dilation)
    groups = int(groups or 1)
    if weight.shape[0] != t.shape[1] or t.shape[1] % groups:
        raise ValueError(f"conv_transpose: weight {weight.shape} must have {t.shape[1]} input channels "
                         f"(axis 0) divisible by groups={groups}.")
    out_pads = int_tuple(output_padding if output_padding else (0,) * n, n, "conv_transpose output_padding")
    kernel = weight.shape[2:]
    if output_shape:
        spatial = int_tuple(output_shape, n, "conv_transpose output_shape")
    else:
        spatial = tuple(s * (i - 1) + op + (k - 1) * d + 1 - pads[a] - pads[n + a]
                        for a, (i, s, op, k, d) in enumerate(zip(t.shape[2:], strides, out_pads, kernel, dilations)))
    if any(s < 1 for s in spatial):
        raise ValueError(f"conv_transpose: invalid output spatial shape {spatial}.")
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "groups": groups,
             "pad_type": pad_type or "not_set", "output_padding": out_pads, "output_shape": spatial,
             "available_memory_proportions": available_memory_proportions, "partials_types": partials_types,
             "enable_conv_dithering": enable_conv_dithering}
    return _record(op, t, weight, log2_scale, (t.shape[0], weight.shape[1] * groups) + spatial, attrs)


@op_debug_context
def conv_pow2scaled(t: Tensor, weight: Tensor, log2_scale: Tensor, stride: Optional[Tuple[int, ...]] = (1, 1),
                    padding: Optional[Tuple[int, ...]] = (0, 0, 0, 0), dilation: Optional[Tuple[int, ...]] = (1, 1),
                    groups: Optional[int] = 1, pad_type: Optional[PadType] = "not_set",
                    available_memory_proportions: Optional[List[float]] = None,
                    enable_conv_dithering: Optional[List[int]] = None) -> Tensor:
    """``conv(t, weight) * 2 ** log2_scale`` of float8 ``t`` and ``weight``, a float16 result.

    Arguments as :func:`conv`; ``log2_scale`` is a scalar int32 tensor, in [-32, 32) when the
    program runs. Raises TypeError for operands that are not float8 or a scale that is not int32,
    ValueError for a scale that is not a scalar."""
    return _conv("conv_pow2scaled", t, weight, log2_scale, stride, padding, dilation, groups, pad_type,
                 available_memory_proportions, None, enable_conv_dithering)


@op_debug_context
def conv_transpose_pow2scaled(t: Tensor, weight: Tensor, log2_scale: Tensor,
                              stride: Optional[Tuple[int, ...]] = (1, 1),
                              padding: Optional[Tuple[int, ...]] = (0, 0, 0, 0),
                              dilation: Optional[Tuple[int, ...]] = (1, 1),
                              groups: Optional[int] = 1, pad_type: Optional[PadType] = "not_set",
                              output_padding: Optional[Tuple[int, ...]] = (),
                              output_shape: Optional[Tuple[int, ...]] = (),
                              available_memory_proportions: Optional[List[float]] = None,
                              enable_conv_dithering: Optional[List[int]] = None) -> Tensor:
    """``conv_transpose(t, weight) * 2 ** log2_scale`` of float8 tensors, a float16 result
    (arguments as :func:`conv_transpose`, the scale as :func:`conv_pow2scaled`)."""
    return _conv_transpose("conv_transpose_pow2scaled", t, weight, log2_scale, stride, padding, dilation, groups,
                           pad_type, output_padding, output_shape, available_memory_proportions, None,
                           enable_conv_dithering)


def multi_conv_options(sess_opts, attr_param, available_memory_proportions, partials_types, enable_conv_dithering):
    """The per-convolution planner options, as a dict."""
    return {"available_memory_proportions": available_memory_proportions, "partials_types": partials_types,
            "enable_conv_dithering": enable_conv_dithering}


def receptive_attributes(strides, pads, out_pads, dilations, in_dilations, auto_pad, ceil_mode):
    """The window attributes of a pooling op, as a dict."""
    return {"strides": strides, "pads": pads, "out_pads": out_pads, "dilations": dilations,
            "in_dilations": in_dilations, "auto_pad": auto_pad, "ceil_mode": bool(ceil_mode)}


def _pool(op_type: str, t: Tensor, kernel_size, stride, padding, out_pads, dilation, in_dilations, auto_pad,
          ceil_mode, extra) -> Tensor:
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, op_type)
    check_float(op_type, t)
    kernel = int_tuple(kernel_size, None, f"{op_type} kernel_size")
    n = len(kernel)
    if any(k < 1 for k in kernel):
        raise ValueError(f"{op_type}: kernel_size {kernel} must be >= 1 on every axis.")
    if t.rank != n + 2:
        raise ValueError(f"{op_type}: a kernel of {n} spatial axes needs t of rank {n + 2}, got {t.shape}.")
    strides, pads, dilations = _spatial_args(op_type, t, n, stride, padding, dilation)
    if in_dilations and any(int(d) != 1 for d in in_dilations):
        raise NotImplementedError(f"{op_type}: input dilations are not supported by this simulator.")
    if out_pads and any(int(p) != 0 for p in out_pads):
        raise NotImplementedError(f"{op_type}: output padding is not supported by this simulator.")
    spatial, pads = window_output_shape(t.shape[2:], kernel, strides, pads, dilations, auto_pad or "not_set",
                                        bool(ceil_mode), what=op_type)
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if any(p >= s for p, s in zip(list(pads[:n]) + list(pads[n:]), span + span)):
        raise ValueError(f"{op_type}: padding {tuple(pads)} must be smaller than the kernel's extent "
                         f"{tuple(span)} on every side (as ONNX pooling requires): a window of padding "
                         "alone has no element to pool.")
    attrs = {"kernel_size": kernel, "strides": strides, "pads": pads, "dilations": dilations,
             "auto_pad": auto_pad or "not_set", "ceil_mode": bool(ceil_mode), **extra}
    return single(op_type, [t], t.shape[:2] + spatial, t.dtype, attrs)


@op_debug_context
def average_pool(t: Tensor, kernel_size: Tuple[int, ...], stride: Optional[Tuple[int, ...]] = None,
                 padding: Optional[Tuple[int, ...]] = None, out_pads: Optional[Tuple[int, ...]] = None,
                 dilation: Optional[Tuple[int, ...]] = None, in_dilations: Optional[Tuple[int, ...]] = None,
                 auto_pad: Optional[PadType] = "not_set", ceil_mode: bool = False) -> Tensor:
    """Average over windows of ``kernel_size`` of the spatial axes of ``t`` (N, C, *spatial)."""
    return _pool("average_pool", t, kernel_size, stride, padding, out_pads, dilation, in_dilations, auto_pad,
                 ceil_mode, {})


@op_debug_context
def max_pool(t: Tensor, kernel_size: Tuple[int, ...], stride: Optional[Tuple[int, ...]] = None,
             padding: Optional[Tuple[int, ...]] = None, out_pads: Optional[Tuple[int, ...]] = None,
             dilation: Optional[Tuple[int, ...]] = None, in_dilations: Optional[Tuple[int, ...]] = None,
             auto_pad: Optional[PadType] = "not_set", ceil_mode: bool = False,
             storage_order: Literal["row", "column"] = "row") -> Tensor:
    """Maximum over windows of ``kernel_size`` of the spatial axes of ``t`` (N, C, *spatial)."""
    return _pool("max_pool", t, kernel_size, stride, padding, out_pads, dilation, in_dilations, auto_pad,
                 ceil_mode, {"storage_order": storage_order})


@op_debug_context
def interpolate(t: Tensor, scale_factor: Optional[Tuple[float, ...]] = (1.0, 1.0, 1.0, 1.0),
                mode: Optional[str] = "nearest", nearest_mode: Optional[str] = "round_prefer_floor",
                coordinate_transformation_mode: Optional[str] = "half_pixel") -> Tensor:
    """Resize ``t``: axis ``i`` becomes ``floor(shape[i] * scale_factor[i])`` long (in float32)."""
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "interpolate")
    check_float("interpolate", t)
    if scale_factor is None:
        raise TypeError(f"interpolate: scale_factor must give one float per axis of {t.id} (rank {t.rank}), "
                        "not None.")
    scales = tuple(float(s) for s in scale_factor)
    if len(scales) != t.rank:
        raise ValueError(f"interpolate: {len(scales)} scale factors for a tensor of rank {t.rank}.")
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"interpolate: mode must be 'nearest', 'linear' or 'cubic', not {mode!r}.")
    from ._interpolation import COORDINATE_MODES, NEAREST_MODES

    if coordinate_transformation_mode not in COORDINATE_MODES:
        raise ValueError(f"interpolate: Unsupported coordinate transformation mode "
                         f"{coordinate_transformation_mode!r} (PopART's Resize computes "
                         f"{', '.join(repr(m) for m in COORDINATE_MODES)}).")
    if nearest_mode not in NEAREST_MODES + ("pytorch",):
        raise ValueError(f"interpolate: Unrecognised resize nearest mode {nearest_mode!r} (one of "
                         f"{', '.join(repr(m) for m in NEAREST_MODES + ('pytorch',))}).")
    if mode == "nearest" and nearest_mode == "pytorch":  # PopART: floor(i / scale) whatever the coordinates
        nearest_mode, coordinate_transformation_mode = "floor", "asymmetric"
    # floor(length x scale) in float32, as PopART's ResizeOp::setup (5 x 2.6f is 13, not 12)
    shape = tuple(int(np.floor(np.float32(d) * np.float32(s))) for d, s in zip(t.shape, scales))
    return single("interpolate", [t], shape, t.dtype,
                  {"scale_factor": scales, "mode": mode, "nearest_mode": nearest_mode,
                   "coordinate_transformation_mode": coordinate_transformation_mode})


@op_debug_context
def roi_align(t: Tensor, rois: Tensor, batch_index: Tensor, output_size: Tuple[int], spatial_scale: float,
              sampling_ratio: int) -> Tensor:
    """Average-pool each region of interest ``rois`` (K, 4) of image ``batch_index[k]`` of ``t``
    (N, C, H, W) to ``output_size``; the result is (K, C, *output_size)."""
    for name, x in (("t", t), ("rois", rois), ("batch_index", batch_index)):
        if not isinstance(x, Tensor):
            raise not_a_tensor(name, x, "roi_align")
    check_float("roi_align", t)
    if t.rank != 4 or rois.rank != 2 or rois.shape[1] != 4 or batch_index.shape != (rois.shape[0],):
        raise ValueError(f"roi_align: expected t (N, C, H, W), rois (K, 4), batch_index (K,); got {t.shape}, "
                         f"{rois.shape}, {batch_index.shape}.")
    out = int_tuple(output_size, 2, "roi_align output_size")
    return single("roi_align", [t, rois, batch_index], (rois.shape[0], t.shape[1]) + out, t.dtype,
                  {"output_size": out, "spatial_scale": float(spatial_scale), "sampling_ratio": int(sampling_ratio)},
                  input_names=["t", "rois", "batch_index"])


def _roi_align_grad(dy: Tensor, rois: Tensor, batch_index: Tensor, x_shape: Tuple[int, ...], attrs: dict) -> Tensor:
    """The gradient of roi_align with respect to its image (what autodiff records; PopART's
    RoiAlignGradOp): each region's bin gradients spread back over the pixels its samples read."""
    return single("roi_align_grad", [dy, rois, batch_index], tuple(x_shape), dy.dtype, dict(attrs),
                  input_names=["dy", "rois", "batch_index"])


def _conv_weights_grad(t: Tensor, dy: Tensor, kernel_shape: Tuple[int, ...], strides, pads, dilations,
                       groups: int) -> Tensor:
    """The gradient of a convolution's weight (M, C / groups, *kernel) from its input ``t`` and the
    gradient ``dy`` of its output (what autodiff records for grouped convolutions; PopART's
    ConvWeightsGradOp): dW[g Mg + m, c, k] = sum over n, o of dy[n, g Mg + m, o] x t_pad[n, g Cg + c, o s + k d]."""
    m, c = dy.shape[1], t.shape[1]
    shape = (m, c // groups) + tuple(int(k) for k in kernel_shape)
    return single("conv_weights_grad", [t, dy], shape, dy.dtype,
                  {"strides": tuple(strides), "pads": tuple(pads), "dilations": tuple(dilations), "groups": int(groups),
                   "kernel_shape": tuple(int(k) for k in kernel_shape)}, input_names=["t", "dy"])
