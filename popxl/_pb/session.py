"""`Session._pb_session`: PopART's session behind a PopXL session, as far as scripts use it
(popxl-addons' `write_variables_pb`: `writeWeights(popart.PyWeightsIO)` then `weightsFromHost()`)."""
from __future__ import annotations

import numpy as np


class PbSession:
    def __init__(self, session):
        self._s = session

    def _variable(self, tensor_id: str):
        for v in self._s._host_weights:
            if v.id == tensor_id:
                return v
        raise KeyError(f"writeWeights: {tensor_id!r} is not a variable of this session's Ir "
                       f"(variables: {sorted(v.id for v in self._s._host_weights)})")

    def writeWeights(self, weightsIo) -> None:  # noqa: N802,N803
        """Set the host copy of each variable named in `weightsIo` (a popart.PyWeightsIO); the
        device gets them with weightsFromHost()."""
        s = self._s
        items = [(self._variable(tid), np.asarray(arr)) for tid, arr in weightsIo.weights.items()]
        with s._lock:
            if s.is_attached and s._device_is_newer:
                s.weights_to_host()
            for v, arr in items:
                want = s._host_weights[v]
                if arr.size != want.size:
                    raise ValueError(f"writeWeights: variable {v.id!r} holds {want.size} elements "
                                     f"(shape {want.shape}), the data has shape {arr.shape}")
                s._set_host_weight(v, np.array(arr, dtype=want.dtype).reshape(want.shape))

    def weightsFromHost(self) -> None:  # noqa: N802
        self._s.weights_from_host()

    def weightsToHost(self) -> None:  # noqa: N802
        self._s.weights_to_host()

    def readWeights(self, weightsIo) -> None:  # noqa: N802,N803
        for tid, out in weightsIo.weights.items():
            out[...] = self._s.get_tensor_data(self._variable(tid)).reshape(out.shape)

    def getReport(self):  # noqa: N802
        """The session's PopVision report (a `pva.Report`: profiler/api.py's libpva-shaped reader)
        of its executable and the runs so far. With profiling off (no POPLAR_ENGINE_OPTIONS
        autoReport / IPU_SIM_PROFILE) the execution part holds the first executed steps only
        (popxl._profiling.QUIET_TRACE_ENTRIES)."""
        from profiler.api import Report
        from popxl import _profiling
        return Report(_profiling.document(self._s))
