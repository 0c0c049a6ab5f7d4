"""Poplar's PrintTensor text format, for `ops.print_tensor` (Poplar's `PrintTensorFmt` options).

What a print looks like (Poplar prints `title: ` then the tensor, to standard error):

    title: [1.4962566 1.7682219]          a rank-1 tensor on one line, wrapped at max_line_width
    title: {                              higher ranks: the outer bracket, then each sub-tensor on
     {1.4962566 1.7682219}                its own line, one space of indent per level, and the
     {1.0884774 1.1320305}                closing bracket on a line of its own
    }

Numbers: `digits` significant digits; "fixed" uses as many decimals as the largest magnitude
leaves (1.4962566 for digits=8), "scientific" 1.4962566e+00, "auto" fixed unless the magnitudes
call for exponents (>= 1e8 or a non-zero below 1e-4), "none" the C++ stream default (%g).
Tensors with more than `summarise_threshold` elements show `edge_items` at each end of every
axis with `...` between. A wrapped row continues two spaces deeper than its bracket. These follow
the outputs Poplar prints for PopTorch's and PopXL's print tests (graphcore/poptorch
tests/print_tensor_test.py); layouts those outputs do not show are our reading of the options.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FLOAT_FORMATS = ("auto", "fixed", "scientific", "none")


@dataclass(frozen=True)
class PrintFormat:
    summarise_threshold: int = 1000
    edge_items: int = 3
    max_line_width: int = 75
    digits: int = 8
    float_format: str = "auto"
    separator: str = " "
    open_bracket: str = "["
    close_bracket: str = "]"

    @classmethod
    def from_attrs(cls, attrs: dict) -> "PrintFormat":
        return cls(**{k: attrs[k] for k in cls.__dataclass_fields__ if k in attrs})


def _float_formatter(values: np.ndarray, fmt: PrintFormat):
    finite = np.abs(values[np.isfinite(values)].astype(np.float64))
    digits = max(1, int(fmt.digits))
    mode = fmt.float_format
    if mode == "none":
        return lambda v: _special(v) or f"{float(v):g}"
    if mode == "auto":
        big = finite.size and finite.max() >= 1e8
        small = finite[finite > 0]
        mode = "scientific" if big or (small.size and small.min() < 1e-4) else "fixed"
    if mode == "scientific":
        return lambda v: _special(v) or f"{float(v):.{digits - 1}e}"
    largest = finite.max() if finite.size else 0.0
    int_digits = max(1, int(math.floor(math.log10(largest))) + 1) if largest >= 1 else 1
    decimals = max(0, digits - int_digits)
    return lambda v: _special(v) or f"{float(v):.{decimals}f}"


def _special(v) -> str:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return ""


def _element_formatter(array: np.ndarray, fmt: PrintFormat):
    if array.dtype.kind == "f":
        return _float_formatter(array, fmt)
    if array.dtype.kind == "b":
        return lambda v: "1" if v else "0"
    return lambda v: str(int(v))


def format_tensor(array: np.ndarray, fmt: PrintFormat = PrintFormat()) -> str:
    """The text Poplar's PrintTensor shows for `array` (without the `title: ` prefix)."""
    array = np.asarray(array)
    summarise = array.size > fmt.summarise_threshold
    fmt_elem = _element_formatter(array, fmt)
    if array.ndim == 0:
        return fmt_elem(array[()])
    lines: list[str] = []
    _rows(array, fmt, fmt_elem, summarise, 0, lines)
    return "\n".join(lines)


def _indices(n: int, fmt: PrintFormat, summarise: bool):
    """Indices shown along an axis of length n; None marks the elided middle."""
    k = max(0, int(fmt.edge_items))
    if summarise and n > 2 * k:
        return list(range(k)) + [None] + list(range(n - k, n))
    return list(range(n))


def _rows(array, fmt, fmt_elem, summarise, depth, lines) -> None:
    pad = " " * depth
    if array.ndim == 1:
        shown = _indices(array.shape[0], fmt, summarise)
        lines.extend(_wrap([fmt_elem(array[i]) if i is not None else "..." for i in shown], fmt, pad))
        return
    lines.append(pad + fmt.open_bracket)
    for i in _indices(array.shape[0], fmt, summarise):
        if i is None:
            lines.append(pad + " ...")
        else:
            _rows(array[i], fmt, fmt_elem, summarise, depth + 1, lines)
    lines.append(pad + fmt.close_bracket)


def _wrap(items: list[str], fmt: PrintFormat, pad: str) -> list[str]:
    """One bracketed row, broken before an element that would pass max_line_width."""
    lines = []
    line = pad + fmt.open_bracket
    cont = pad + "  "
    fresh = True
    for j, item in enumerate(items):
        last = j == len(items) - 1
        text = item + (fmt.close_bracket if last else fmt.separator)
        if not fresh and len((line + text).rstrip()) > fmt.max_line_width:
            lines.append(line.rstrip())
            line = cont
        line += text
        fresh = False
    if not items:
        line += fmt.close_bracket
    lines.append(line)
    return lines
