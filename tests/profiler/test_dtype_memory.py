"""The profile's tensor memory by element type: float8 at one byte per element, per tile, and the
report's table."""
import io

import numpy as np
from rich.console import Console

import ipu
from profiler import build_profile
from profiler._format import unrle


def test_dtypes_section_counts_float8_as_one_byte_per_element():
    g = ipu.Graph(ipu.small_target(3))
    x8 = g.add_variable("x8", (1000,), ipu.FLOAT8_152)
    h = g.add_variable("h", (300,), ipu.FLOAT16)
    f = g.add_variable("f", (10,), ipu.FLOAT32)
    g.set_tile_mapping(x8, {0: [(0, 600)], 2: [(600, 1000)]})
    g.set_tile_mapping(h, 1)
    g.set_tile_mapping(f, 2)
    exe = ipu.compile(g, ipu.Sequence())
    doc = build_profile(exe)
    d = doc["memory"]["dtypes"]
    assert list(d) == ["float8_152", "float16", "float32"]  # largest first
    assert d["float8_152"]["total"] == 1000 and d["float8_152"]["max_tile"] == 600
    assert unrle(d["float8_152"]["tile"]).tolist() == [600, 0, 400]
    assert unrle(d["float16"]["tile"]).tolist() == [0, 600, 0] and d["float16"]["tiles_holding"] == 1
    assert d["float32"]["total"] == 40
    # the per-dtype bytes are the tensors' share of the variables category
    assert sum(v["total"] for v in d.values()) == doc["memory"]["totals"]["variables"]


def test_report_has_the_dtype_table(tmp_path):
    from profiler.report import _render_dtypes

    g = ipu.Graph(ipu.small_target(2))
    x8 = g.add_variable("x8", (64,), ipu.FLOAT8_143)
    g.set_tile_mapping(x8, 0)
    doc = build_profile(ipu.compile(g, ipu.Sequence()))
    buf = io.StringIO()
    _render_dtypes(doc, Console(file=buf, width=100))
    text = buf.getvalue()
    assert "element type" in text and "float8_143" in text and "64 B" in text
    assert np.all(np.asarray(unrle(doc["memory"]["dtypes"]["float8_143"]["tile"])) == [64, 0])
