"""The frontend's ONNX coverage against PopART's: every ai.onnx op PopART registers a creator for
(popart/_translate/popart_registry.py, read from PopART's willow/src/op) is translated by a rule or
refused on purpose with a reason, and an op PopART lacks gets PopART's own error."""
from __future__ import annotations

import onnx
import onnx.defs
import pytest
from onnx import helper as oh

import popart
from popart._translate import RULES
from popart._translate.popart_registry import NOT_TRANSLATED, POPART_ONNX_OPS

from popart_helpers import device

ONNX_OPS = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""}
TRANSLATED = {t for d, t in RULES if d == ""}


def test_every_op_popart_registers_is_translated_or_refused_with_a_reason():
    missing = sorted(op for op in POPART_ONNX_OPS if op not in TRANSLATED and op not in NOT_TRANSLATED)
    assert not missing, f"PopART registers these ai.onnx ops, which the frontend neither translates nor refuses: " \
                        f"{missing}"


def test_refusals_are_of_ops_popart_has_and_we_do_not_translate():
    assert set(NOT_TRANSLATED) <= set(POPART_ONNX_OPS)
    assert not set(NOT_TRANSLATED) & TRANSLATED
    assert all(len(reason) > 40 for reason in NOT_TRANSLATED.values())


def test_the_table_names_onnx_ops_and_versions_in_order():
    assert set(POPART_ONNX_OPS) <= ONNX_OPS
    for op, versions in POPART_ONNX_OPS.items():
        assert list(versions) == sorted(set(versions)), op


def _model(op, n_inputs=1, opset=11):
    ins = [oh.make_tensor_value_info(f"x{i}", onnx.TensorProto.FLOAT, [2, 3]) for i in range(n_inputs)]
    node = oh.make_node(op, [i.name for i in ins], ["y"], name="n")
    g = oh.make_graph([node], "g", ins, [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)]).SerializeToString()


@pytest.mark.parametrize("op", ["ScatterND", "GatherND", "GatherElements", "Hardmax", "Celu", "NonZero", "Einsum"])
def test_an_op_popart_lacks_gets_popart_error(op):
    assert op not in POPART_ONNX_OPS
    with pytest.raises(popart.popart_exception, match=rf"No class for ai\.onnx\.{op}:0 \(node 'n'\)"):
        popart.InferenceSession(_model(op, opset=13), popart.DataFlow(1, ["y"]), device())


def test_an_op_of_another_domain_gets_popart_error():
    node = oh.make_node("FusedMatMul", ["x0", "x1"], ["y"], name="n", domain="com.microsoft")
    ins = [oh.make_tensor_value_info(f"x{i}", onnx.TensorProto.FLOAT, [2, 2]) for i in range(2)]
    g = oh.make_graph([node], "g", ins, [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 11), oh.make_opsetid("com.microsoft", 1)])
    with pytest.raises(popart.popart_exception, match=r"No class for com\.microsoft\.FusedMatMul:0 \(node 'n'\)"):
        popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]), device())


def test_the_compatibility_doc_lists_what_is_translated_and_refused():
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "compatibility.md").read_text()
    section = text[text.index("## PopART: ONNX ops"):]
    supported, refused = set(), set()
    for row in re.findall(r"^\| ([A-Z][A-Za-z0-9, ]+) \| (supported|not supported) \|", section, re.M):
        names = {n.strip() for n in row[0].split(",")}
        (supported if row[1] == "supported" else refused).update(names)
    assert supported == TRANSLATED
    assert refused == set(NOT_TRANSLATED)


def test_a_refused_op_says_why(monkeypatch):
    """The path an op PopART has takes when the frontend refuses it (none does today)."""
    monkeypatch.delitem(RULES, ("", "Shrink"))
    monkeypatch.setitem(NOT_TRANSLATED, "Shrink", "the simulator's frontend refuses Shrink in this test, because ...")
    with pytest.raises(popart.popart_exception, match=r"ONNX op Shrink \(node 'n'\): the simulator's frontend refuses"):
        popart.InferenceSession(_model("Shrink"), popart.DataFlow(1, ["y"]), device())
