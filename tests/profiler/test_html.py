"""The HTML page is self-contained and draws its pictures in a real headless browser, error free."""
import json
import os
import re
import subprocess
import tempfile

import pytest

import ipu
from profiler import build_profile
from profiler.html import render_html
from profiler_helpers import chromium_binary, code_load_program, known_program

CHROMIUM = chromium_binary()


def _gc200_profile():
    """A GC200-sized program: a linearly mapped ScaledAdd over all 1472 tiles and an exchange."""
    g = ipu.Graph(ipu.GC200)
    n = 1472 * 64
    x = g.add_variable("x", (n,), "float32")
    y = g.add_variable("y", (n,), "float32")
    g.map_linearly(x)
    g.map_linearly(y)
    z = g.add_variable("z", (n,), "float32", ipu.TEMPORARY)
    g.set_tile_mapping(z, {(t + 1) % 1472: [(t * 64, (t + 1) * 64)] for t in range(1472)})
    cs = g.add_compute_set("sa")
    for t in range(0, 1472, 7):
        g.add_vertex(cs, "ScaledAdd", (t + 1) % 1472, data=z[t * 64:(t + 1) * 64], deltas=z[t * 64:(t + 1) * 64], a=1.0, b=2.0)
    prog = ipu.Sequence(ipu.Copy(x, z), ipu.Execute(cs), ipu.Copy(z, x))
    exe = ipu.compile(g, prog)
    e = ipu.Engine(exe)
    e.run()
    return build_profile(exe, e)


def test_page_is_self_contained(ran_known):
    exe, engine, _ = ran_known
    page = render_html(build_profile(exe, engine))
    assert page.startswith("<!DOCTYPE html>")
    # nothing is fetched: no external scripts, styles, images or fonts
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert page.count("<script") == 3
    assert not re.search(r"__(TITLE|DATA|CSS|JS)__", page)


def test_page_takes_the_step_classes_from_the_document(ran_known):
    """Every step carries its class in the document (its step kind's, ipu.kinds); the page gets
    the step kind -> class table of the document with its data, and its script (package data)
    holds no copy of it."""
    from profiler import _format
    from profiler.html import page_file

    exe, engine, _ = ran_known
    doc = build_profile(exe, engine)
    page = render_html(doc)
    data = json.loads(re.search(r'<script id="profile-data" type="application/json">(.*?)</script>', page,
                                re.S).group(1))
    assert data["kindClass"] == {s["kind"]: s["class"] for s in doc["steps"]}
    assert data["kindClass"]["sync"] == "sync" and data["classes"] == list(_format.CLASSES)
    js = page_file("page.js")
    assert "host_to_device" not in js and "branch:" not in js


def _run_chromium(html_path, tmp):
    user = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
           "--disable-dev-shm-usage", f"--user-data-dir={user}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=5000", "--dump-dom", "file://" + os.path.abspath(html_path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return p


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does it)")
@pytest.mark.parametrize("which", ["small", "gc200", "code_loading"])
def test_page_loads_in_headless_chromium_without_script_errors(tmp_path, which):
    if which == "small":
        exe, e, _ = known_program()
        e.run()
        doc = build_profile(exe, e)
    elif which == "code_loading":
        exe, e = code_load_program()
        e.run()
        doc = build_profile(exe, e)
    else:
        doc = _gc200_profile()
    path = tmp_path / "profile.html"
    path.write_text(render_html(doc))
    p = _run_chromium(path, str(tmp_path))
    dom = p.stdout
    status = re.search(r'<div id="status"([^>]*)>', dom)
    assert status, f"no DOM from chromium (exit {p.returncode}):\n{p.stderr[-2000:]}"
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', status.group(1)))
    errors = re.search(r'<pre id="js-errors"[^>]*>(.*?)</pre>', dom, re.S).group(1)
    console_errors = [ln for ln in p.stderr.splitlines()
                      if "CONSOLE" in ln and ("Uncaught" in ln or "Error" in ln)]
    assert not errors.strip(), errors
    assert not console_errors, console_errors
    assert attrs.get("errors") == "0" and attrs.get("rendered") == "ok", attrs
    # every picture drew something
    nt = doc["target"]["num_tiles"]
    assert int(attrs["heatmap-cells"]) == nt
    assert int(attrs["liveness-points"]) == doc["liveness"]["positions"]
    assert int(attrs["bsp-columns"]) > 100
    assert int(attrs["op-bars"]) > 0
    assert int(attrs["histogram-bars"]) > 0
    if doc["code"]:  # the Code memory panel drew every tile, every position and every load
        assert int(attrs["code-tile-columns"]) == nt
        assert int(attrs["code-live-points"]) == doc["liveness"]["positions"]
        assert int(attrs["code-load-rows"]) == len(doc["code"]["load_steps"])
        assert int(attrs["code-load-marks"]) == len(doc["code"]["load_steps"])
        assert 'id="code-section" style=""' in dom or 'id="code-section">' in dom
    else:
        assert attrs.get("code-tile-columns") == "0"


def test_page_shows_code_loading():
    exe, e = code_load_program()
    e.run()
    page = render_html(build_profile(exe, e))
    assert "Code memory" in page and "code load" in page and "code: saved by loading" in page
    data = re.search(r'<script id="profile-data" type="application/json">(.*?)</script>', page, re.S).group(1)
    code = json.loads(data)["code"]
    assert code["load_steps"] and code["summary"]["peak_tile_saved"] > 0
    assert all("tile_bytes" not in f for f in code["functions"])
