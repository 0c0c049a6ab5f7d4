"""Reading ONNX models: load (bytes, path, ModelProto), check with the onnx package, upgrade old
opsets, find the inputs and weights, and infer every tensor's shape by translating the graph."""
from __future__ import annotations

import os
from typing import Dict, List, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from .errors import popart_exception
from .tensorinfo import TensorInfo, type_name

MIN_OPSET = 6  # older models are upgraded with onnx.version_converter


def load_model(model) -> onnx.ModelProto:
    """A ModelProto from serialized bytes, a file name or a ModelProto (copied: the caller's is untouched)."""
    if isinstance(model, onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        return m
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as e:
            raise popart_exception(f"The model bytes are not a serialized ONNX ModelProto: {e}") from e
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise popart_exception(f"ONNX model file {path!r} does not exist (pass a file name, or the bytes of "
                                   f"builder.getModelProto())")
        try:
            return onnx.load(path)
        except Exception as e:
            raise popart_exception(f"Could not read the ONNX model {path!r}: {e}") from e
    raise popart_exception(f"fnModel must be a file name, the model's bytes or an onnx.ModelProto, not "
                           f"{type(model).__name__}")


def onnx_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 10


def prepare_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """Check the model (onnx.checker, for models of standard ops) and upgrade opsets < 6."""
    custom = any(n.domain not in ("", "ai.onnx") for n in model.graph.node)
    if not custom:
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as e:
            # an output the Builder could not type fails the check; the reason is in its inference
            try:
                infer_tensor_infos(model)
            except popart_exception as cause:
                raise popart_exception(f"The ONNX model is not valid: {cause} (onnx.checker: {e})") from e
            except Exception:
                pass
            raise popart_exception(f"The ONNX model is not valid: {e}") from e
    version = onnx_opset(model)
    if version < MIN_OPSET:
        from onnx import version_converter
        try:
            model = version_converter.convert_version(model, 11)
        except Exception as e:
            raise popart_exception(f"The model uses ai.onnx opset {version}; converting it to opset 11 failed: "
                                   f"{e}") from e
    if version > onnx.defs.onnx_opset_version():
        raise popart_exception(f"The model uses ai.onnx opset {version}, newer than the onnx package knows "
                               f"({onnx.defs.onnx_opset_version()}); upgrade onnx")
    return model


class ModelIO:
    """The model's data inputs (graph inputs without an initializer), its weights and its outputs."""

    def __init__(self, model: onnx.ModelProto, input_shape_info=None):
        g = model.graph
        self.initializers: Dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.inputs: List[Tuple[str, TensorInfo]] = []
        for vi in g.input:
            if vi.name in self.initializers:
                continue
            if input_shape_info is not None and input_shape_info.has(vi.name):
                self.inputs.append((vi.name, input_shape_info.get(vi.name)))
                continue
            tt = vi.type.tensor_type
            if not tt.elem_type:
                raise popart_exception(f"Input {vi.name!r} has no type; give it with InputShapeInfo")
            dims = []
            for d in tt.shape.dim:
                if d.HasField("dim_value"):
                    dims.append(int(d.dim_value))
                else:
                    raise popart_exception(
                        f"Input {vi.name!r} has a dynamic dimension {d.dim_param or '?'!r}; the IPU needs static "
                        f"shapes: give the shape with popart.InputShapeInfo (inputShapeInfo.add({vi.name!r}, "
                        f"popart.TensorInfo(dtype, shape))) or export the model with fixed shapes")
            self.inputs.append((vi.name, TensorInfo(type_name(tt.elem_type), dims)))
        self.outputs = [o.name for o in g.output]
        from .options import VARIABLE_SETTINGS_KEY, VariableSettings
        self.variable_settings: Dict[str, VariableSettings] = {
            p.key[len(VARIABLE_SETTINGS_KEY):]: VariableSettings._decode(p.value)
            for p in model.metadata_props if p.key.startswith(VARIABLE_SETTINGS_KEY)}

    def is_weight(self, tid: str) -> bool:
        """Trainable: a floating-point initializer (PopART's weights)."""
        return tid in self.initializers and self.initializers[tid].dtype.kind == "f"


def infer_tensor_infos(model: onnx.ModelProto, input_shape_info=None) -> Dict[str, TensorInfo]:
    """Every tensor's TensorInfo, by translating the graph into a scratch popxl Ir (nothing runs)."""
    import popxl

    from ._translate import Translation

    io = ModelIO(model, input_shape_info)
    ir = popxl.Ir()
    tr = Translation(onnx_opset(model))
    out: Dict[str, TensorInfo] = {}
    with ir.main_graph:
        g = ir.create_empty_graph("shape_inference")
        with g:
            for name, info in io.inputs:
                tr.values[name] = popxl.graph_input(info.shape(), _device_dtype(info), name=name.replace(":", "_"))
                out[name] = info
            for name, arr in io.initializers.items():
                if io.is_weight(name):
                    tr.values[name] = popxl.graph_input(arr.shape, popxl.dtypes.dtype.as_dtype(arr.dtype),
                                                        name=name.replace(":", "_"))
                    tr.initial_values[name] = arr
                else:
                    tr.consts[name] = arr
                out[name] = TensorInfo(arr)
            for node in model.graph.node:
                tr.run_node(node)
                for tid in node.output:
                    if tid in tr.values:
                        t = tr.values[tid]
                        out[tid] = TensorInfo(_type_of(t.dtype), list(t.shape))
                    elif tid in tr.consts:
                        out[tid] = TensorInfo(np.asarray(tr.consts[tid]))
    return out


def _device_dtype(info: TensorInfo):
    import popxl

    from ._translate.context import device_numpy_type
    from .tensorinfo import onnx_type
    return popxl.dtypes.dtype.as_dtype(device_numpy_type(onnx_type(info.data_type())))


def _type_of(dt) -> str:
    return type_name(np.dtype(dt.as_numpy()))
