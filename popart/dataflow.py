"""DataFlow, AnchorReturnType and the step IO classes (PyStepIO, PyStepIOCallback, PyWeightsIO).

Anchor arrays are shaped [batchesPerStep, accumulationFactor, replicationFactor, *shape] with the
size-1 leading dimensions dropped: "All" keeps all three, "EveryN" has batchesPerStep / N in the
first place, "Final" and "Sum" keep only the replica dimension. Inputs have the "All" shape.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ._enum import PybindEnum
from .errors import popart_exception
from .tensorinfo import TensorInfo


class AnchorReturnTypeId(PybindEnum):
    Final = 0
    EveryN = 1
    All = 2
    Sum = 3


class ExchangeStrategy(PybindEnum):
    JustInTime = 0
    OverlapInnerLoop = 1
    OverlapLoops = 2
    OverlapStep = 3


class AnchorReturnType:
    """What of an anchored tensor goes back to the host each step: AnchorReturnType("All"),
    ("Final"), ("EveryN", N) or ("Sum")."""

    def __init__(self, artString: str = "All", returnPeriod: Optional[int] = None, *rest):  # noqa: N803
        if isinstance(artString, AnchorReturnTypeId):
            artString = artString.name
        key = str(artString).lower()
        names = {"all": AnchorReturnTypeId.All, "final": AnchorReturnTypeId.Final,
                 "everyn": AnchorReturnTypeId.EveryN, "sum": AnchorReturnTypeId.Sum}
        if key not in names:
            raise popart_exception(f"Unknown AnchorReturnType {artString!r}; use 'All', 'Final', 'EveryN' or 'Sum'")
        self._id = names[key]
        if self._id == AnchorReturnTypeId.EveryN:
            if returnPeriod is None or int(returnPeriod) < 1:
                raise popart_exception("AnchorReturnType('EveryN', N) needs a return period N >= 1")
            self._period = int(returnPeriod)
        else:
            if returnPeriod is not None and not isinstance(returnPeriod, ExchangeStrategy):
                raise popart_exception(f"AnchorReturnType({artString!r}) takes no return period")
            self._period = 1
        self.exchangeStrategy = ExchangeStrategy.JustInTime

    def id(self) -> AnchorReturnTypeId:
        return self._id

    def rp(self) -> int:
        return self._period

    def str(self) -> str:  # noqa: A003 - PopART's name
        return {"All": "ALL", "Final": "FINAL", "EveryN": "EVERYN", "Sum": "SUM"}[self._id.name]

    def __repr__(self) -> str:
        return f"AnchorReturnType({self._id.name}" + (f", {self._period})" if self._id.name == "EveryN" else ")")


class DataFlow:
    """How many batches one `run` processes and which tensors come back to the host."""

    def __init__(self, batchesPerStep: int, anchorTensors=None,  # noqa: N803
                 anchorReturnType: Optional[AnchorReturnType] = None):  # noqa: N803
        if int(batchesPerStep) < 1:
            raise popart_exception(f"batchesPerStep must be >= 1, not {batchesPerStep}")
        self._bps = int(batchesPerStep)
        anchors: Dict[str, AnchorReturnType] = {}
        if isinstance(anchorTensors, dict):
            for k, v in anchorTensors.items():
                if not isinstance(v, AnchorReturnType):
                    raise popart_exception(f"anchor {k!r}: expected a popart.AnchorReturnType, got {type(v).__name__}")
                anchors[str(k)] = v
        elif anchorTensors is not None:
            art = anchorReturnType or AnchorReturnType("All")
            for k in anchorTensors:
                anchors[str(k)] = art
        self._anchors = anchors

    def anchors(self) -> List[str]:
        return list(self._anchors)

    def art(self, anchor: str) -> AnchorReturnType:
        if anchor not in self._anchors:
            raise popart_exception(f"Tensor {anchor!r} is not an anchor of this DataFlow (anchors: {self.anchors()})")
        return self._anchors[anchor]

    def batchesPerStep(self) -> int:  # noqa: N802
        return self._bps

    def setBatchesPerStep(self, n: int) -> None:  # noqa: N802
        self._bps = int(n)

    def isAnchored(self, tid: str) -> bool:  # noqa: N802
        return tid in self._anchors

    def nAnchors(self) -> int:  # noqa: N802
        return len(self._anchors)


def anchor_leading_dims(art: AnchorReturnType, bps: int, af: int, rf: int) -> List[int]:
    """The leading dims of an anchor array (size-1 ones dropped)."""
    k = art.id()
    if k == AnchorReturnTypeId.All:
        dims = [bps, af, rf]
    elif k == AnchorReturnTypeId.EveryN:
        dims = [bps // art.rp(), af, rf]
    else:  # Final, Sum
        dims = [rf]
    return [d for d in dims if d != 1]


def input_leading_dims(bps: int, af: int, rf: int) -> List[int]:
    return [d for d in (bps, af, rf) if d != 1]


class PyStepIO:
    """Inputs and anchor outputs of one `run`, as dicts of NumPy arrays keyed by tensor id."""

    def __init__(self, inputs: Dict[str, np.ndarray], outputs: Dict[str, np.ndarray]):
        if not isinstance(inputs, dict) or not isinstance(outputs, dict):
            raise popart_exception("PyStepIO(inputs, outputs) takes two dicts of tensor id -> numpy array")
        self.inputs = inputs
        self.outputs = outputs
        self.runtime_asserts = True

    def enableRuntimeAsserts(self, b: bool) -> None:  # noqa: N802
        self.runtime_asserts = bool(b)

    # the session's interface: every input for the whole step, and where each anchor goes
    def _step_inputs(self, ids: Sequence[str]) -> Dict[str, np.ndarray]:
        return {k: self.inputs[k] for k in ids if k in self.inputs}

    def _unknown_inputs(self) -> List[str]:
        return list(self.inputs)

    def _check_outputs(self, anchors: Sequence[str]) -> None:
        missing = [a for a in anchors if a not in self.outputs]
        if missing:
            raise popart_exception(f"PyStepIO has no output array for anchor(s) {missing} (use "
                                   f"session.initAnchorArrays())")

    def _write_output(self, tid: str, data: np.ndarray) -> None:
        out = self.outputs[tid]
        if not isinstance(out, np.ndarray):
            raise popart_exception(f"PyStepIO output for anchor {tid!r} must be a NumPy array, not {type(out).__name__}")
        if out.shape != data.shape and out.size != data.size:
            raise popart_exception(f"PyStepIO output array for anchor {tid!r} has shape {out.shape}; the anchor "
                                   f"returns {data.shape} (use session.initAnchorArrays())")
        if out.dtype != data.dtype:
            raise popart_exception(f"PyStepIO output array for anchor {tid!r} is {out.dtype}; the anchor is "
                                   f"{data.dtype} (use session.initAnchorArrays())")
        out.reshape(data.shape)[...] = data


class PyStepIOCallback:
    """Step IO through callbacks: `input_callback(id, prefetch)` returns one batch of an input,
    `input_complete_callback(id)` is told when it was consumed; `output_callback(id)` returns the
    array to write one batch of an anchor into, `output_complete_callback(id)` is told when it was
    written. Called once per batch (micro-batch and replica) the step moves, in order."""

    def __init__(self, input_callback: Callable, input_complete_callback: Callable, output_callback: Callable,
                 output_complete_callback: Callable):
        self.input_callback = input_callback
        self.input_complete_callback = input_complete_callback
        self.output_callback = output_callback
        self.output_complete_callback = output_complete_callback


class PyWeightsIO:
    """Weight data for `writeWeights` / `readWeights`: a dict of weight id -> NumPy array."""

    def __init__(self, weights: Dict[str, np.ndarray]):
        if not isinstance(weights, dict):
            raise popart_exception("PyWeightsIO takes a dict of weight id -> numpy array")
        self.weights = weights

    def contains(self, tid: str) -> bool:
        return tid in self.weights


class InputShapeInfo:
    """Shapes for model inputs whose ONNX shape is missing or dynamic."""

    def __init__(self):
        self._infos: Dict[str, TensorInfo] = {}

    def add(self, tid: str, info: TensorInfo) -> None:
        self._infos[tid] = info

    def get(self, tid: str) -> TensorInfo:
        return self._infos[tid]

    def has(self, tid: str) -> bool:
        return tid in self._infos
