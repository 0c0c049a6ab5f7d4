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
    """The recipe of docs/architecture.md: an entry naming an existing UnaryOp op gives the frontend
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
