"""popart.Builder: opsets, ids, the model proto, node attributes, shapes."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import popart


def test_default_opset_is_10_and_the_first_versioned_opset_fixes_it():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    b.aiOnnx.relu([x])
    m = onnx.load_from_string(b.getModelProto())
    assert {i.domain: i.version for i in m.opset_import}[""] == 10
    with pytest.raises(popart.popart_exception, match="already 10"):
        b.aiOnnxOpset11.relu([x])
    b2 = popart.Builder()
    y = b2.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    b2.aiOnnxOpset11.relu([y])
    b2.aiOnnx.relu([y])  # aiOnnx follows the fixed version
    with pytest.raises(popart.popart_exception, match="already 11"):
        b2.aiOnnxOpset9.relu([y])
    b3 = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    z = b3.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    b3.aiOnnx.relu([z])
    b3.aiGraphcore.scale([z], 2.0)
    m3 = onnx.load_from_string(b3.getModelProto())
    assert {i.domain: i.version for i in m3.opset_import} == {"": 9, "ai.graphcore": 1}
    with pytest.raises(ValueError, match="ai.graphcore opset 2"):
        popart.builder.AiGraphcore(b3, 2)


def test_ids_model_proto_bytes_and_queries():
    b = popart.Builder()
    i1 = b.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 3]))
    i2 = b.addInputTensor("FLOAT16", [4], "half_in")
    w = b.addInitializedInputTensor(np.zeros((3,), np.float32), "weight")
    assert (i1, i2, w) == ("input", "half_in", "weight")
    a = b.aiOnnx.add([i1, w])
    a2 = b.aiOnnx.add([i1, w])
    named = b.aiOnnx.relu([a], "my_relu")
    assert (a, a2, named) == ("Add:0", "Add:0/1", "my_relu:0")
    with b.nameScope("block"):
        scoped = b.aiOnnx.neg([a])
    assert scoped == "block/Neg:0"
    b.addOutputTensor(named)
    proto = b.getModelProto()
    assert isinstance(proto, bytes)
    m = onnx.load_from_string(proto)
    onnx.checker.check_model(m)
    assert b.getInputTensorIds() == ["input", "half_in", "weight"]
    assert b.getOutputTensorIds() == [named]
    assert b.getTrainableTensorIds() == ["weight"] and b.isInitializer("weight") and not b.isInitializer(i1)
    assert b.getTensorShape(named) == [1, 2, 3] and b.getTensorDtypeString(i2) == "float16"
    assert set(b.getValueTensorIds()) == {a, a2, named, scoped}


def test_builder_from_a_model_continues_it(tmp_path):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    y = b.aiOnnx.relu([x])
    path = tmp_path / "m.onnx"
    b.saveModelProto(str(path))
    for src in (str(path), b.getModelProto()):
        b2 = popart.Builder(src)
        z = b2.aiOnnx.neg([y])
        assert b2.getTensorShape(z) == [3] and z == "Neg:0"


def test_placement_attributes():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    with b.virtualGraph(1), b.pipelineStage(2):
        assert b.hasVirtualGraph() and b.getVirtualGraph() == 1 and b.getPipelineStage() == 2
        y = b.aiOnnx.relu([x])
    z = b.aiOnnx.neg([y])
    b.virtualGraph(z, 0)
    b.recomputeOutputInBackwardPass(z)
    b.setInplacePreferences(z, {"NegInplace": 10.0})
    b.setAvailableMemoryProportion(z, 0.3)
    assert b.getVirtualGraph(y) == 1 and b.getVirtualGraph(z) == 0
    assert b.getInt64NodeAttribute("__pipeline_stage", [y]) == 2
    assert b.getRecomputeOutputInBackwardPass(z)
    assert b.getFloatNodeAttribute("availableMemoryProportion", [z]) == pytest.approx(0.3)
    b.addNodeAttribute("myAttr", [1, 2], {z})
    assert b.nodeHasAttribute("myAttr", {z}) and b.getInt64VectorNodeAttribute("myAttr", {z}) == [1, 2]
    b.removeNodeAttribute("myAttr", {z})
    assert not b.nodeHasAttribute("myAttr", {z})


def test_multi_output_ops_return_lists_and_signatures():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 4, 4]), "x")
    outs = b.aiOnnx.maxpool([x], num_outputs=1, kernel_shape=[2, 2])
    assert isinstance(outs, list) and len(outs) == 1
    parts = b.aiOnnx.split([b.aiOnnx.flatten([x])], 2, axis=1)
    assert len(parts) == 2 and b.getTensorShape(parts[1]) == [1, 8]
    assert "kernel_shape" in b.aiOnnx.conv.__doc__
    c = b.aiOnnx.cast([x], "INT32")
    assert b.getTensorDtypeString(c) == "int32"


def test_tensor_info():
    info = popart.TensorInfo("FLOAT16", [2, 3])
    assert info.shape() == [2, 3] and info.data_type_lcase() == "float16" and info.nelms() == 6
    assert popart.TensorInfo(np.zeros((4,), np.int32)) == popart.TensorInfo(popart.DataType.INT32, [4])
    with pytest.raises(popart.popart_exception, match="Unknown data type"):
        popart.TensorInfo("FLOT", [1])
