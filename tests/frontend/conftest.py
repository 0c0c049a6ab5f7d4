import numpy as np
import pytest

import popxl


@pytest.fixture
def ir():
    return popxl.Ir()


@pytest.fixture
def main(ir):
    """The main graph of a fresh Ir, entered for the duration of the test."""
    with ir.main_graph as g:
        yield g


def _var(shape, dtype=np.float32, name=None):
    return popxl.variable(np.zeros(shape, dtype), name=name)


@pytest.fixture
def var():
    """``var(shape, dtype=float32, name=None)``: a zero variable in the current graph."""
    return _var
