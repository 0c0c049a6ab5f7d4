"""Ops that do not change values much: cast, identity, detach, init, print_tensor, histogram, and
the copies between tile sets and IPUs."""

from typing import Iterable, List, Literal, Optional, Union

from popxl import dtypes
from popxl._casts import integer_dims
from popxl.context import get_current_context, op_debug_context
from popxl.tensor import Tensor

from ._op_builder import single, not_a_tensor
from ._shapes import check_float8, check_log2_scale

__all__ = ["cast", "pow2scale_cast_to_fp8", "pow2scale_cast_from_fp8", "pow2scale_then_cast", "cast_then_pow2scale",
           "identity", "detach", "detach_", "init", "print_tensor", "histogram", "check_increment", "io_tile_copy",
           "ipu_copy"]


def _tensor(op: str, t) -> Tensor:
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, op)
    return t


@op_debug_context
def cast(t: Tensor, data_type: dtypes.dtype) -> Tensor:
    """``t`` converted to ``data_type``. float8 goes through the scaled casts instead."""
    _tensor("cast", t)
    data_type = dtypes.dtype.as_dtype(data_type)
    if data_type in dtypes.FLOAT8_DTYPES:
        raise TypeError(f"ops.cast cannot cast to {data_type.name}: use ops.pow2scale_cast_to_fp8(t, log2_scale, "
                        f"popxl.{data_type.name}), which takes the power-of-two scale float8 casts need.")
    if t.dtype in dtypes.FLOAT8_DTYPES:
        raise TypeError(f"ops.cast cannot cast from {t.dtype.name}: use ops.pow2scale_cast_from_fp8(t, log2_scale, "
                        f"{data_type.name}).")
    return single("cast", [t], t.shape, data_type, {"dtype": data_type})


@op_debug_context
def pow2scale_cast_to_fp8(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype) -> Tensor:
    """``cast(t * 2 ** log2_scale, data_type)``: float16/float32 to float8 on the device.

    Args:
        t: a float16 or float32 tensor.
        log2_scale: a scalar int32 tensor; its value must be in [-32, 32) when the program runs
            (checked when the session option ``throwIfLog2ScaleTensorNotInRange`` is set).
        data_type: ``popxl.float8_143`` or ``popxl.float8_152``.
    Rounds to nearest even; values beyond the format's range become NaN.
    Raises:
        TypeError: for another input or output dtype, or a log2_scale that is not int32.
        ValueError: if log2_scale is not a scalar.
    """
    op = "pow2scale_cast_to_fp8"
    _tensor(op, t)
    data_type = dtypes.dtype.as_dtype(data_type)
    if data_type not in dtypes.FLOAT8_DTYPES:
        raise TypeError(f"{op}: data_type must be popxl.float8_143 or popxl.float8_152, not {data_type.name}.")
    if t.dtype not in (dtypes.float16, dtypes.float32):
        raise TypeError(f"{op}: the input must be float16 or float32, got {t.id} of dtype {t.dtype.name}.")
    check_log2_scale(op, log2_scale)
    return single("pow2scale_then_cast", [t, log2_scale], t.shape, data_type, {"dtype": data_type},
                  input_names=["t", "log2_scale"])


@op_debug_context
def pow2scale_cast_from_fp8(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype = dtypes.float16) -> Tensor:
    """``cast(t, data_type) * 2 ** log2_scale``: float8 to float16 (or float32) on the device.

    Raises:
        TypeError: if t is not float8, data_type not float16/float32, or log2_scale not int32.
        ValueError: if log2_scale is not a scalar.
    """
    op = "pow2scale_cast_from_fp8"
    check_float8(op, t)
    data_type = dtypes.dtype.as_dtype(data_type)
    if data_type not in (dtypes.float16, dtypes.float32):
        raise TypeError(f"{op}: data_type must be popxl.float16 or popxl.float32, not {data_type.name}.")
    check_log2_scale(op, log2_scale)
    return single("cast_then_pow2scale", [t, log2_scale], t.shape, data_type, {"dtype": data_type},
                  input_names=["t", "log2_scale"])


@op_debug_context
def pow2scale_then_cast(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype) -> Tensor:
    """The 3.1 name of :func:`pow2scale_cast_to_fp8`."""
    return pow2scale_cast_to_fp8(t, log2_scale, data_type)


@op_debug_context
def cast_then_pow2scale(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype = dtypes.float16) -> Tensor:
    """The 3.1 name of :func:`pow2scale_cast_from_fp8`."""
    return pow2scale_cast_from_fp8(t, log2_scale, data_type)


@op_debug_context
def identity(t: Tensor, output_name: Optional[str] = None) -> Tensor:
    """A copy of ``t`` (named ``output_name`` if given)."""
    _tensor("identity", t)
    return single("identity", [t], t.shape, t.dtype, out_names=[output_name or "identity_out"])


@op_debug_context
def detach(t: Tensor) -> Tensor:
    """A copy of ``t`` that autodiff does not propagate gradients through."""
    _tensor("detach", t)
    return single("detach", [t], t.shape, t.dtype)


@op_debug_context
def detach_(t: Tensor) -> Tensor:
    """``t`` itself, as an alias that autodiff does not propagate gradients through."""
    _tensor("detach", t)
    return single("detach", [t], t.shape, t.dtype, aliases={0: 0}, out_names=["detach_inplace_out"])


@op_debug_context
def init(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None,
         init_type: Union[Literal["zero"], Literal["undef"]] = "zero",
         meta_shape: Optional[Iterable[int]] = None) -> Tensor:
    """A new tensor, zero-filled (``'zero'``) or left uninitialised (``'undef'``)."""
    if init_type not in ("zero", "undef"):
        raise ValueError(f"init: init_type must be 'zero' or 'undef', not {init_type!r}.")
    dtype = dtypes.dtype.as_dtype(dtype)
    shape = integer_dims(shape, "init")
    return single("init", [], shape, dtype, {"init_type": init_type}, out_names=[name or "init_out"],
                  out_meta_shapes=[tuple(meta_shape) if meta_shape else ()])


@op_debug_context
def print_tensor(t: Tensor, title: Optional[str] = None, print_self: bool = True, print_gradient: bool = False,
                 summarise_threshold: int = 1000, edge_items: int = 3, max_line_width: int = 75, digits: int = 8,
                 float_format: str = "auto", separator: str = " ", open_bracket: str = "[",
                 close_bracket: str = "]") -> Tensor:
    """Print ``t`` when the program runs; returns a tensor equal to ``t`` to use afterwards."""
    for what, char in (("separator", separator), ("open_bracket", open_bracket), ("close_bracket", close_bracket)):
        if len(char) != 1:  # PopXL's check and words (PopART's op takes any string: PopTorch's ", ")
            raise ValueError(f"Parameter {what} must be 1 character exactly. Not length {len(char)} and value {char}.")
    return print_tensor_op(t, title, print_self, print_gradient, summarise_threshold, edge_items, max_line_width,
                           digits, float_format, separator, open_bracket, close_bracket)


@op_debug_context("print_tensor")
def print_tensor_op(t: Tensor, title: Optional[str] = None, print_self: bool = True, print_gradient: bool = False,
                    summarise_threshold: int = 1000, edge_items: int = 3, max_line_width: int = 75, digits: int = 8,
                    float_format: str = "auto", separator: str = " ", open_bracket: str = "[",
                    close_bracket: str = "]") -> Tensor:
    """PopART's PrintTensor op as frontends create it: separator and brackets of any length (PopTorch's
    ipu_print_tensor prints with ", ", "(" and ")"); :func:`print_tensor` is PopXL's API over it."""
    _tensor("print_tensor", t)
    if float_format not in ("auto", "fixed", "scientific", "none"):
        raise ValueError(f"print_tensor: float_format must be 'auto', 'fixed', 'scientific' or 'none', "
                         f"not {float_format!r}.")
    # PopXL 3.x's default title is "print_<name>" (SDK 2.x printed "print<name>")
    attrs = {"title": title if title is not None else f"print_{t.name}", "print_self": bool(print_self),
             "print_gradient": bool(print_gradient), "summarise_threshold": int(summarise_threshold),
             "edge_items": int(edge_items), "max_line_width": int(max_line_width), "digits": int(digits),
             "float_format": float_format, "separator": separator, "open_bracket": open_bracket,
             "close_bracket": close_bracket}
    return single("print_tensor", [t], t.shape, t.dtype, attrs)


def check_increment(levels: List[float]):
    """Raise ValueError unless ``levels`` increase strictly."""
    for a, b in zip(levels, levels[1:]):
        if not b > a:
            raise ValueError(f"histogram levels must increase strictly, got {list(levels)}.")


@op_debug_context
def histogram(t: Tensor, levels: List[float], absolute_of_input: bool) -> Tensor:
    """Count the elements of ``t`` in the ``len(levels) + 1`` bins the ``levels`` delimit (uint32)."""
    _tensor("histogram", t)
    levels = [float(x) for x in levels]
    check_increment(levels)
    return single("histogram", [t], (len(levels) + 1,), dtypes.uint32,
                  {"levels": tuple(levels), "absolute_of_input": bool(absolute_of_input)})


@op_debug_context
def io_tile_copy(t: Tensor) -> Tensor:
    """Copy ``t`` to or from the IO tiles: to the other tile set than the one ``t`` is on (as
    PopXL infers it from the tensor); for a tensor whose tile set is not known yet, to the tile
    set of the current context (IO tiles inside ``popxl.io_tiles()``, compute tiles outside)."""
    from popxl.context import _tile_set
    _tensor("io_tile_copy", t)
    if t._tile_set is not None:
        target = "compute" if t._tile_set == "io" else "io"
    else:
        target = "io" if get_current_context().io_tile_set else "compute"
    with _tile_set(target):
        return single("io_tile_copy", [t], t.shape, t.dtype, {"destination": target}, check_placement=False)


@op_debug_context
def ipu_copy(t: Tensor, destination: int, source: Optional[int] = None) -> Tensor:
    """Copy ``t`` to IPU ``destination`` (of the same replica), over the IPU-Links.

    Args:
        t: the tensor to copy.
        destination: the IPU to copy it to.
        source: the IPU it is on; by default the IPU of the op that produces ``t`` (or that uses it).

    Raises:
        ValueError: if the source IPU cannot be inferred and is not given.
    """
    _tensor("ipu_copy", t)
    if source is None:
        source = t._ipu if t._ipu is not None else t._get_ipu_and_tile_set(False, False)[0]
        if source is None:
            raise ValueError(f'Could not infer the ipu for Tensor to be copied "{t}" . '
                             "Please specify `source` when copying for this tensor.")
    source, destination = int(source), int(destination)
    if source < 0 or destination < 0:
        raise ValueError(f"ipu_copy: IPU numbers must be >= 0, got source {source} and destination {destination}.")
    out = single("ipu_copy", [t], t.shape, t.dtype, {"source": source, "destination": destination},
                 out_names=[t.name + f"_c{destination}"], check_placement=False, out_meta_shapes=[t.meta_shape])
    out._producer_op().ipu = source  # the copy reads on the source IPU; its output lives on the destination
    out._set_ipu(destination)
    return out
