"""InferenceSession.fromIr: a popxl Ir run behind PopART's session methods, the way popart.ir
programs were run (inputs and anchors keyed by the streams' tensor ids)."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

import ipu
import popxl

from .dataflow import PyStepIO
from .devices import DeviceInfo
from .errors import OutOfMemoryException, popart_exception


class IrSession:
    """InferenceSession.fromIr: a popxl.Session behind PopART's session methods."""

    def __init__(self, ir, deviceInfo: DeviceInfo, name: str):  # noqa: N803
        if not isinstance(ir, popxl.Ir):
            raise popart_exception(f"fromIr takes a popxl.Ir (or its _pb_ir), not {type(ir).__name__}")
        self._ir, self.deviceInfo, self.name = ir, deviceInfo, name
        self._session: Optional[popxl.Session] = None
        self._last_cycles = 0

    def prepareDevice(self, loadEngine: bool = True, err=None) -> None:  # noqa: N802,N803
        if self._session is None:
            from popxl._frontends import ipus_per_replica
            target = self.deviceInfo.target_for(self._ir.instance_replication_factor, ipus_per_replica(self._ir))
            try:
                self._session = popxl.Session(self._ir, target)
            except ipu.OutOfMemoryError as e:
                raise OutOfMemoryException(e) from e
            self._session.frontend = "popart"
            self._session.__enter__()

    def _s(self, what: str) -> popxl.Session:
        if self._session is None:
            raise popart_exception(f"{what}: call session.prepareDevice() first")
        return self._session

    def initAnchorArrays(self) -> Dict[str, np.ndarray]:  # noqa: N802
        return {s.tensor_id: a for s, a in self._s("initAnchorArrays").create_host_outputs().items()}

    def run(self, stepio: PyStepIO, debugName: str = "") -> None:  # noqa: N803
        s = self._s("run")
        by_id = {st.tensor_id: st for st in s.expected_inputs()}
        unknown = [k for k in stepio.inputs if k not in by_id]
        if unknown:
            raise popart_exception(f"PyStepIO has input(s) {unknown} that no host_load reads; inputs are "
                                   f"{sorted(by_id)}")
        outs = {st: np.zeros_like(stepio.outputs[st.tensor_id]) for st in s._lowered.d2h
                if st.tensor_id in stepio.outputs}
        before = s.total_cycles
        try:
            s.run_with_outputs({by_id[k]: v for k, v in stepio.inputs.items()}, outs)
        except ValueError as e:
            raise popart_exception(str(e)) from e
        self._last_cycles = s.total_cycles - before
        for st, arr in outs.items():
            stepio.outputs[st.tensor_id][...] = arr

    def weightsFromHost(self) -> None:  # noqa: N802
        self._s("weightsFromHost").weights_from_host()

    def weightsToHost(self) -> None:  # noqa: N802
        self._s("weightsToHost").weights_to_host()

    def getCycleCount(self, id: str = "") -> int:  # noqa: N802,A002
        return int(self._last_cycles)

    def getIr(self):  # noqa: N802
        return self._ir
