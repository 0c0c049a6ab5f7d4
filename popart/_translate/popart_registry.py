"""The ai.onnx ops PopART registers an op creator for, as data (read from graphcore/popart,
willow/src/op/*.cpp: each `OpCreator<...>` with its `Onnx::Operators::<Op>_<version>` list, SDK 3.x).

PopART builds a node through `OpManager::createOpInGraph`: an ai.onnx op type with no creator is
its error "No class for ai.onnx.<Op>:0". Here every op of this table is either translated by a
rule (`context.RULES`) or refused on purpose with the reason in `NOT_TRANSLATED`, and every other
ai.onnx op gets PopART's words (tests/popart/test_popart_registry.py keeps the three in step).

Versions are the op-set versions PopART's creators name (or its user guide's list of supported
operators); `()` marks an op whose creator we know but whose versions we did not record.
"""
from __future__ import annotations

from typing import Dict, Tuple

POPART_ONNX_OPS: Dict[str, Tuple[int, ...]] = {
    "Abs": (6,), "Acos": (7,), "Acosh": (9,), "Add": (6, 7), "And": (1, 7), "ArgMax": (1, 11), "ArgMin": (1, 11),
    "Asin": (7,), "Asinh": (9,), "Atan": (7,), "Atanh": (9,), "AveragePool": (1, 7, 10, 11),
    "BatchNormalization": (6, 7, 9), "Cast": (6, 9), "Ceil": (1, 6), "Clip": (6, 11), "Concat": (1, 4, 11),
    "Constant": (9, 11), "ConstantOfShape": (9,), "Conv": (1, 11), "ConvTranspose": (1, 11), "Cos": (7,),
    "Cosh": (9,), "CumSum": (11,), "DepthToSpace": (1, 11), "Div": (6, 7), "Dropout": (6, 7, 10), "Elu": (1, 6),
    "Equal": (1, 7, 11), "Erf": (9,), "Exp": (6,), "Expand": (8,), "Flatten": (1, 9, 11), "Floor": (1, 6),
    "GRU": (3, 7), "Gather": (1, 11), "Gemm": (6, 7, 9), "GlobalAveragePool": (1,), "GlobalMaxPool": (1,),
    "Greater": (1, 7, 9), "HardSigmoid": (1, 6), "Identity": (1,), "If": (1, 11), "InstanceNormalization": (6,),
    "IsInf": (10,), "IsNaN": (9,), "LRN": (1,), "LSTM": (1, 7), "LeakyRelu": (1, 6), "Less": (7, 9), "Log": (6,),
    "LogSoftmax": (1, 11), "Loop": (1, 11), "MatMul": (1, 9), "Max": (6, 8), "MaxPool": (1, 8, 10, 11),
    "Mean": (6, 8), "Min": (6, 8), "Mod": (10,), "Mul": (6, 7), "Neg": (6,), "Not": (1,), "OneHot": (9, 11),
    "Or": (1, 7), "PRelu": (9,), "Pad": (2, 11), "Pow": (1, 7), "RNN": (7,), "RandomNormal": (1,),
    "RandomNormalLike": (1,), "RandomUniform": (1,), "RandomUniformLike": (1,), "Reciprocal": (6,),
    "ReduceL1": (), "ReduceL2": (), "ReduceLogSum": (), "ReduceLogSumExp": (), "ReduceMax": (),
    "ReduceMean": (1, 11), "ReduceMin": (), "ReduceProd": (), "ReduceSum": (1, 11), "ReduceSumSquare": (),
    "Relu": (6,), "Reshape": (5,), "Resize": (10, 11), "RoiAlign": (10,), "Round": (11,), "Scan": (9, 11),
    "Scatter": (9, 11), "ScatterElements": (11,), "Selu": (1, 6), "Shape": (1,), "Shrink": (9,), "Sigmoid": (6,),
    "Sign": (9,), "Sin": (7,), "Sinh": (9,), "Slice": (1, 10, 11), "Softmax": (1, 11), "Softplus": (1,),
    "Softsign": (1,), "SpaceToDepth": (1,), "Split": (2, 11), "Sqrt": (6,), "Squeeze": (1, 11), "Sub": (6, 7),
    "Sum": (6, 8), "Tan": (7,), "Tanh": (6,), "ThresholdedRelu": (10,), "Tile": (1,), "TopK": (1, 10, 11),
    "Transpose": (1,), "Unsqueeze": (1, 11), "Upsample": (9,), "Where": (9,),
}

# ONNX ops PopART has a creator for that the simulator's frontend refuses, with the reason
# (none today: every op above has a rule; the limits of some rules' attributes are in their errors)
NOT_TRANSLATED: Dict[str, str] = {}


def no_class_message(domain: str, op_type: str, node_name: str) -> str:
    """PopART's error for an op it registers no creator for (OpManager::createOpInGraph), then ours."""
    return (f"No class for {domain}.{op_type}:0 (node {node_name!r}): PopART has no implementation of the op "
            f"{domain}.{op_type}, so neither has the simulator. Express it with ops PopART supports "
            f"(docs/compatibility.md lists the ONNX ones) or as a custom op")
