"""popxl.op_table against the rule registries: every op type has exactly the lowering, gradient and
reference rules its entry says, and nothing records an op type or attribute the table lacks."""
import os

import numpy as np
import pytest

import popxl
import popxl.ops as ops
from codelets.elementwise import BINARY_OPS, UNARY_OPS
from popxl import op_table
from popxl.lowering.registry import LOWERING_RULES, get_rule
from popxl.op_table import OP_TYPES, BinaryOpType, OpType, UnaryOpType
from popxl.reference import REFERENCE_RULES, get_reference_rule
from popxl.transforms.grad_rules import GRAD_RULES, NON_DIFFERENTIABLE, has_grad_rule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module", autouse=True)
def _registries_loaded():
    get_rule("add")
    has_grad_rule("add")
    get_reference_rule("add")


def test_the_lowering_rules_are_the_tables():
    assert set(LOWERING_RULES) <= set(OP_TYPES), f"rules for op types the table lacks: {set(LOWERING_RULES) - set(OP_TYPES)}"
    want = {n for n, e in OP_TYPES.items() if e.lowering}
    assert set(LOWERING_RULES) == want, (f"entries saying lowering=True without a rule: {want - set(LOWERING_RULES)}; "
                                         f"rules of entries saying lowering=False: {set(LOWERING_RULES) - want}")


def test_the_gradient_rules_are_the_tables():
    assert set(GRAD_RULES) | NON_DIFFERENTIABLE <= set(OP_TYPES)
    assert not set(GRAD_RULES) & NON_DIFFERENTIABLE
    for kind, got in (("rule", set(GRAD_RULES)), ("none", set(NON_DIFFERENTIABLE))):
        want = {n for n, e in OP_TYPES.items() if e.gradient == kind}
        assert got == want, f"gradient {kind!r}: registered but not in the table {got - want}, in the table only {want - got}"


def test_every_op_type_has_a_reference_rule():
    want = {n for n, e in OP_TYPES.items() if e.reference}
    assert set(REFERENCE_RULES) == want == set(OP_TYPES)


def test_table_driven_entries_name_codelet_ops_and_families_that_exist():
    families = {f[:-3] for f in os.listdir(os.path.join(ROOT, "popxl", "ops")) if f.endswith(".py")}
    families |= {d for d in os.listdir(os.path.join(ROOT, "popxl", "ops"))
                 if os.path.isdir(os.path.join(ROOT, "popxl", "ops", d)) and not d.startswith("_")}
    for e in OP_TYPES.values():
        assert e.family in families, f"{e.name}: no popxl/ops module for family {e.family!r}"
        if isinstance(e, UnaryOpType):
            assert e.codelet_op in UNARY_OPS, e
            assert hasattr(ops, e.name) and (hasattr(ops, e.name + "_") == e.inplace), e.name
        if isinstance(e, BinaryOpType):
            assert e.codelet_op in BINARY_OPS, e
            assert hasattr(ops, e.name), e.name


def test_recording_an_unknown_op_type_or_attribute_fails():
    from popxl.ops._op_builder import single

    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(3, np.float32))
        with pytest.raises(ValueError, match="not in the op table"):
            single("no_such_op", [x], (3,), popxl.float32)
        with pytest.raises(ValueError, match=r"does not record the attribute\(s\) \['colour'\]"):
            single("relu", [x], (3,), popxl.float32, {"colour": "red"})


def test_the_table_refuses_a_second_entry_of_a_name():
    with pytest.raises(ValueError, match="already in the op table"):
        op_table.register_op_type(OpType("add", "elementwise"))
    with pytest.raises(ValueError, match="gradient must be one of"):
        OpType("x", "misc", gradient="maybe")


def test_a_unary_op_is_one_table_entry(monkeypatch):
    """docs/recipes.md, "A unary op": an entry naming an existing UnaryOp op gives the frontend
    function, its in-place form, the lowering, the reference rule and (with a derivative) the
    gradient rule. (Registered here as a user would, then taken out again.)"""
    entry = UnaryOpType("rsqrt_for_test", codelet_op="rsqrt", inplace=True,
                        derivative=lambda x, y: y * y * y * -0.5)
    try:
        op_table.register_op_type(entry)
        assert "rsqrt_for_test" in LOWERING_RULES and "rsqrt_for_test" in GRAD_RULES
        assert "rsqrt_for_test" in REFERENCE_RULES
        monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
        x = np.linspace(0.5, 4, 11).astype(np.float32)
        ir = popxl.Ir()
        with ir.main_graph:
            s = popxl.h2d_stream(x.shape, popxl.float32, "x")
            t = ops.host_load(s)
            y = ops.rsqrt_for_test(t)
            ops.rsqrt_for_test_(t)
            d = popxl.d2h_stream(x.shape, popxl.float32, "y")
            ops.host_store(d, y + t)
        with popxl.Session(ir, "ipu_model") as sess:
            got = sess.run({s: x})[d]
        want = popxl.reference.run(ir, {s: x})[d]
        np.testing.assert_allclose(got, 2 / np.sqrt(x), rtol=1e-6)
        np.testing.assert_allclose(want, got, rtol=1e-6)
    finally:
        OP_TYPES.pop("rsqrt_for_test", None)
        for reg in (LOWERING_RULES, GRAD_RULES, REFERENCE_RULES):
            reg.pop("rsqrt_for_test", None)
        from popxl.ops import elementwise

        for name in ("rsqrt_for_test", "rsqrt_for_test_"):
            elementwise.UNARY_FUNCTIONS.pop(name, None)
            for module in (ops, elementwise):
                if hasattr(module, name):
                    delattr(module, name)
                if name in module.__all__:
                    module.__all__.remove(name)


def test_every_built_in_unary_op_is_a_def_that_grep_finds():
    """`def erf` in popxl/ops/elementwise.py, imported by name in popxl/ops/__init__.py: no function of
    a built-in entry is made at import time (only a unary op registered later is)."""
    import ast

    from popxl.ops import elementwise

    def parsed(*parts):
        with open(os.path.join(ROOT, "popxl", "ops", *parts), encoding="utf-8") as f:
            return ast.parse(f.read())

    defs = {n.name for n in parsed("elementwise.py").body if isinstance(n, ast.FunctionDef)}
    imported = {a.name for n in parsed("__init__.py").body
                if isinstance(n, ast.ImportFrom) and n.module == "elementwise" for a in n.names}
    for e in op_table.op_types(UnaryOpType):
        if e.name not in op_table.BUILTIN_OP_TYPES:
            continue
        for name in [e.name] + [e.name + "_"] * e.inplace:
            assert name in defs and name in imported, f"popxl.ops.{name}: no def in popxl/ops/elementwise.py"
            assert getattr(ops, name) is getattr(elementwise, name) is elementwise.UNARY_FUNCTIONS[name]
            assert name in ops.__all__ and name in elementwise.__all__


# Rules that live outside the module their family names (popxl/{lowering/rules, transforms/grad_rules,
# reference/rules}/<family>.py), each group with its reason. A rule in neither place fails.
RULES_ELSEWHERE = {
    # float8: the number format's ops of three families share one module (scales, casts, checks)
    "float8": {"pow2scale_then_cast", "cast_then_pow2scale", "matmul_pow2scaled", "conv_pow2scaled",
               "conv_transpose_pow2scaled"},
    # remote buffers: the host_io family's remote ops lower with the remote buffer layout
    "remote": {"remote_load", "remote_store", "remote_code_load"},
    # the row-wise lowering (one row per worker: sorts, scans, selections) shared by these reductions
    "rowwise": {"argmax", "argmin", "topk", "median", "cumsum"},
    # large lowerings of the conv family in modules of their own
    "resize": {"interpolate"},
    "roi_align": {"roi_align", "roi_align_grad"},
    # a cast lowers as an element-wise vertex; identity and detach as copies and views
    "elementwise": {"cast"},
    "shape": {"identity", "detach"},
    # LAMB's norm is part of the optimiser updates
    "var_updates": {"lamb_square"},
    # a copy between IPUs is an exchange between IPUs, beside the collectives
    "collectives": {"ipu_copy"},
}


@pytest.mark.parametrize("registry,package", [(LOWERING_RULES, "popxl.lowering.rules"),
                                              (GRAD_RULES, "popxl.transforms.grad_rules"),
                                              (REFERENCE_RULES, "popxl.reference.rules")])
def test_every_rule_lives_in_its_familys_module(registry, package):
    elsewhere = {op: module for module, ops_ in RULES_ELSEWHERE.items() for op in ops_}
    for name, rule in registry.items():
        entry = OP_TYPES[name]
        if name not in op_table.BUILTIN_OP_TYPES:
            continue
        module = rule.__module__
        want = {f"{package}.{entry.family}"} | ({f"{package}.{elsewhere[name]}"} if name in elsewhere else set())
        assert module in want, (f"the {package} rule of {name!r} is in {module}, not {package}.{entry.family} "
                                "(its op table family): move it, or list it in RULES_ELSEWHERE with the reason")


def test_op_table_prints_where_the_rules_of_an_op_live():
    from popxl._op_sources import describe

    rows = dict(describe("erf"))
    assert rows["frontend"].startswith("popxl.ops.elementwise.erf  popxl/ops/elementwise.py:")
    assert "popxl/lowering/rules/elementwise.py:" in rows["lowering"]
    assert "popxl/transforms/grad_rules/elementwise.py:" in rows["gradient"]
    assert "popxl/reference/rules/elementwise.py:" in rows["reference"]
    assert "UnaryOp op 'erf'" in rows["codelet"] and "poplibs ERF" in rows["codelet"]
    assert "('erf', 'float')" in " ".join(t for w, t in describe("erf") if w == "cost")
    assert rows["onnx"].startswith("Erf ")


def test_python_m_popxl_op_table():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "popxl.op_table", "reciprocal", "no_such_op"], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
    assert out.returncode == 1 and "op type 'no_such_op' is not in the op table" in out.stderr
    assert "RuntimeWarning" not in out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "reciprocal" and any("poplibs INVERSE" in x for x in lines)
    assert any(x.split()[:2] == ["onnx", "Reciprocal"] for x in lines)


def test_a_unary_entry_with_a_codelet_of_its_own_takes_no_unary_op():
    assert UnaryOpType("own_for_test", codelet="Softsign").codelet_op == ""
    with pytest.raises(ValueError, match="takes none"):
        UnaryOpType("own_for_test", codelet="Softsign", codelet_op="exp")
