"""Helpers of the reference rules."""
import numpy as np


def compute_dtype(x: np.ndarray) -> np.dtype:
    """What float arithmetic runs in: float32 for float16 / float32 (as the vertices do), float64 when
    the interpreter runs upcast; integers and bools as they are."""
    if x.dtype == np.float16:
        return np.dtype(np.float32)
    return x.dtype


def wide(x: np.ndarray) -> np.ndarray:
    """x in its compute dtype."""
    return x.astype(compute_dtype(x), copy=False)


def inputs_by_name(op, ins) -> dict:
    names = op.attrs.get("input_names")
    if not names:
        return {}
    return dict(zip(names, ins))


def scalar(op, ins, name, default=None):
    """A hyper-parameter: the op's tensor input of that name, else attrs[name], else default."""
    named = inputs_by_name(op, ins)
    if name in named:
        return np.asarray(named[name]).reshape(())
    value = op.attrs.get(name)
    return default if value is None else value
