"""The out-of-memory error: its advice follows the categories that overflow, and it names owners."""
import numpy as np
import pytest

import ipu


def test_advice_for_variables_only_when_variables_overflow():
    g = ipu.Graph(ipu.small_target(2, bytes_per_tile=4096))
    big = g.add_variable("big_weights", (2000,), "float32")
    g.set_tile_mapping(big, 1)
    small = g.add_variable("small", (10,), "float32")
    g.set_tile_mapping(small, 0)
    with pytest.raises(ipu.OutOfMemoryError) as err:
        ipu.compile(g, ipu.Copy(big[:10], small))
    assert err.value.categories == ["variables"]
    msg = str(err.value)
    assert "variables (weights" in msg and "exchange code:" not in msg
    assert err.value.report[0]["owners"]["variables"][0][0] == "big_weights"


def test_advice_for_exchange_code_when_it_fills_the_tile():
    """An element-by-element transpose of a 64 x 64 matrix onto one small tile: its exchange code,
    not its data, overflows, so the advice is about exchanges and names the exchange."""
    g = ipu.Graph(ipu.small_target(64, bytes_per_tile=1536))
    x = g.add_variable("x", (64, 64), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (64, 64), "float32", category="temporary")
    g.map_linearly(y)
    z = g.add_variable("z", (64, 64), "float32")
    g.map_linearly(z)
    prog = ipu.Sequence(ipu.Copy(x.transpose(), y, name="layer3/reshuffle"), ipu.Copy(y, z))
    with pytest.raises(ipu.OutOfMemoryError) as err:
        ipu.compile(g, prog)
    e = err.value
    assert e.categories[0] == "exchange_code"
    assert "fewer exchanged runs" in str(e) and "stack:" not in str(e)
    assert str(e).index("exchange code:") < str(e).index("variables (weights")  # the largest first
    assert e.report[0]["owners"]["exchange_code"][0][0] == "layer3/reshuffle"
    tile = e.report[0]["tile"]
    assert e.report[0]["categories"]["exchange_code"] > e.report[0]["categories"].get("temporaries", 0)
    assert tile >= 0
