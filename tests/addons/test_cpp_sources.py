"""C++ custom ops are resolved by the sources a program's cppimport would compile: several programs
ship an op under the same module name (popxl-addons' rotary_pos_embed_binding and the copies in
Graphcore's Dolly and Llama applications, which rotate other units); the one served must be the
one compiled, and a source the simulator does not know is a clear error naming it."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import popxl
from popxl import ops
from popxl._addons._sources import CppSources, Variant, digest, function_body, listed_sources

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OPX = textwrap.dedent("""\
    // Copyright (c) 2023 Example
    namespace {
    poplar::Tensor twice(poplar::Graph &graph, poplar::Tensor &x) {
      popart::logging::info("x {} {}", x.shape(), "}{");  // braces in strings are text
      /* a comment { */
      return popops::map(graph, pe::_1 * 2, {x});
    }
    }
    void TwiceOpx::grow(poplar::program::Sequence &prog) const {
      auto x = getInTensor(0);
      setOutTensor(0, twice(graph(), x));
    }
    """)


def _package(tmp_path, opx_text, name="twice"):
    d = tmp_path / name
    d.mkdir()
    (d / f"{name}_binding.cpp").write_text(
        "// cppimport\nPYBIND11_MODULE(x, m) {}\n/*\n<%\ncfg['sources'] = ['twicex.cpp']\n%>\n*/\n")
    (d / "twicex.cpp").write_text(opx_text)
    return d / f"{name}_binding.cpp"


def test_function_bodies_ignore_comments_strings_logging_and_layout(tmp_path):
    src = CppSources(str(_package(tmp_path, OPX)))
    assert listed_sources((tmp_path / "twice" / "twice_binding.cpp").read_text()) == ("twicex.cpp",)
    assert src.where("twice").endswith("twicex.cpp") and src.where("TwiceOpx::grow").endswith("twicex.cpp")
    reformatted = OPX.replace("pe::_1 * 2, {x}", "pe::_1 * 2,\n        {x}").replace("// braces", "// other")
    reformatted = reformatted.replace('popart::logging::info("x {} {}", x.shape(), "}{");', "")
    other = CppSources(str(_package(tmp_path, reformatted, "again")))
    assert other.fingerprint("twice") == src.fingerprint("twice") is not None
    changed = CppSources(str(_package(tmp_path, OPX.replace("pe::_1 * 2", "pe::_1 * 3"), "changed")))
    assert changed.fingerprint("twice") != src.fingerprint("twice")
    variant = Variant("doubling", {"twice": {src.fingerprint("twice")}}, [])
    assert variant.matches(other) and not variant.matches(changed)
    assert variant.differences(changed) == ["twice"]
    # a call or a declaration is not a definition
    assert function_body("int f(int a);\nint g() { return f(1); }\nint f(int a) { return a; }", "f") == "returna;"
    assert digest("x") == digest("x") != digest("y")


def _rope_np(x, sin, cos, r, halves):
    b, s, h, d = x.shape
    xr = x[..., :r].astype(np.float64)
    if halves:
        re, im = xr[..., :r // 2], xr[..., r // 2:]
    else:
        re, im = xr[..., 0::2], xr[..., 1::2]
    sn, cs = sin[:, :, None, :], cos[:, :, None, :]
    y_re, y_im = re * cs - im * sn, im * cs + re * sn
    y = np.concatenate([y_re, y_im], -1) if halves else np.stack([y_re, y_im], -1).reshape(b, s, h, r)
    return np.concatenate([y, x[..., r:]], -1)


@pytest.mark.parametrize("rotary_dim", [6, 4])
def test_the_applications_rotary_op_rotates_contiguous_halves(rotary_dim, monkeypatch):
    """The Dolly / Llama op: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin over the two halves of the
    rotated units; its gradient op is popxl-addons' interleaved one, as in their C++ source."""
    from popxl._addons.rotary_pos_embed import RotaryPosEmbedHalves

    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")
    B, S, H, D = 2, 5, 3, 6
    r = rotary_dim
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, S, H, D)).astype(np.float32)
    g = rng.normal(size=(B, S, H, D)).astype(np.float32)
    ang = np.outer(np.arange(S), 10000.0 ** (-np.arange(0, r, 2) / r)).astype(np.float32)
    sin, cos = np.sin(ang)[None], np.cos(ang)[None]
    ir = popxl.Ir()
    with ir.main_graph:
        sin_t, cos_t = popxl.constant(sin), popxl.constant(cos)
        fwd = ir.create_graph(lambda t, sn, cs: RotaryPosEmbedHalves().create(t, sn, cs, rotary_dim=r)[0],
                              popxl.TensorSpec(x.shape, popxl.float32), sin_t, cos_t)
        grad = popxl.transforms.autodiff(fwd, grads_required=[fwd.inputs[0]])
        info = ops.call_with_info(fwd, popxl.variable(x), sin_t, cos_t)
        dx, = ops.call(grad.graph, popxl.variable(g), inputs_dict=grad.inputs_dict(info))
        ys, ds = popxl.d2h_stream(x.shape, popxl.float32, "y"), popxl.d2h_stream(x.shape, popxl.float32, "dx")
        ops.host_store(ys, info.outputs[0])
        ops.host_store(ds, dx)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
    np.testing.assert_allclose(got[ys], _rope_np(x, sin, cos, r, halves=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[ds], _rope_np(g, -sin, cos, r, halves=False), rtol=1e-5, atol=1e-6)
    assert [op.type for op in fwd.ops] == ["rotary_pos_embed_halves"]


def _run_script(script, *paths):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, paths), ROOT]), IPU_SIM_TARGET="small:8")
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)


def test_popxl_addons_rotary_source_is_served_and_a_changed_copy_is_refused(addons, addons_branch, tmp_path):
    """popxl-addons' own source gets its interleaved op; a copy of the package whose rotateTensor
    is changed gets, when the op is created, an error naming the file and the function."""
    if addons_branch == "sdk-release-3.0":
        pytest.skip("sdk-release-3.0's own rotary op is refused (tests/addons/test_cpp_ops.py)")
    src_dir = os.path.join(os.path.dirname(addons.__file__), "ops", "rotary_pos_embed")
    pkg = tmp_path / "myrope"
    shutil.copytree(src_dir, pkg)
    opx = (pkg / "rotary_pos_embedx.cpp").read_text()
    assert "pe::_2 * pe::_3" in opx
    (pkg / "rotary_pos_embedx.cpp").write_text(opx.replace("pe::_2 * pe::_3", "pe::_2 * pe::_3 * 2", 1))
    (pkg / "__init__.py").write_text("")
    script = textwrap.dedent("""\
        import numpy as np, popxl
        from popxl_addons.ops.rotary_pos_embed import rotary_pos_embed
        from myrope.rotary_pos_embed import rotary_pos_embed as mine
        ir = popxl.Ir()
        with ir.main_graph:
            x = popxl.variable(np.zeros((1, 2, 1, 4), np.float32))
            sn, cs = popxl.constant(np.zeros((2, 2), np.float32)), popxl.constant(np.ones((2, 2), np.float32))
            assert rotary_pos_embed(x, sn, cs).producer.type == "rotary_pos_embed"
            try:
                mine(x, sn, cs)
            except NotImplementedError as e:
                print("REFUSED", e)
        """)
    addons_dir = os.path.dirname(os.path.dirname(os.path.abspath(addons.__file__)))
    out = _run_script(script, tmp_path, addons_dir)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "REFUSED" in out.stdout
    assert str(pkg / "rotary_pos_embedx.cpp") in out.stdout and "`rotateTensor`" in out.stdout
    assert "interleaved pairs" in out.stdout and "contiguous halves" in out.stdout


def test_an_unknown_cppimport_module_imports_and_refuses_to_be_used(tmp_path):
    pkg = tmp_path / "myops"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import cppimport.import_hook\nfrom . import fancy_binding\n")
    (pkg / "fancy_binding.cpp").write_text("// cppimport\n#include <popart/op.hpp>\nPYBIND11_MODULE(fancy_binding, m) {}\n")
    script = textwrap.dedent("""\
        import popxl, myops
        try:
            myops.fancy_binding.FancyOp.createOpInGraph
        except NotImplementedError as e:
            print("REFUSED", e)
        """)
    out = _run_script(script, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "REFUSED fancy_binding.FancyOp" in out.stdout and str(pkg / "fancy_binding.cpp") in out.stdout
