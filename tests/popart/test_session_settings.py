"""SessionOptions' nested settings structures and the enums PopART scripts build them from: PopART's
fields, defaults, constructor order and numbering (sessionoptions.hpp); recorded, with the
once-per-field warning that they do not change results here."""
import numpy as np
import pytest

import popart
from tests.popart.popart_helpers import device


def test_structures_have_popart_defaults_and_constructor_order():
    s = popart.AccumulateOuterFragmentSettings(popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized, [0])
    assert (s.schedule, s.excludedVirtualGraphs) == (popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized, [0])
    assert popart.AccumulateOuterFragmentSettings().schedule == popart.AccumulateOuterFragmentSchedule.Serial
    b = popart.BatchSerializationSettings(4, False, True, True, method=popart.BatchSerializationMethod.Loop)
    assert (b.factor, b.concatOnVirtualGraphChange, b.method) == (4, False, popart.BatchSerializationMethod.Loop)
    assert b.batchSchedule == popart.BatchSerializationBatchSchedule.Isomorphic
    e = popart.ExecutionPhaseSettings()
    assert (e.phases, e.stages, e.optimizerStateIOSchedule) == (0, 2, popart.ExecutionPhaseIOSchedule.OnDemand)
    a = popart.AutomaticLossScalingSettings(True)
    assert a.enabled and a.binEdgeLocation == 0.125 and a.updatePeriod == 1
    assert popart.AutodiffSettings().stitchStrategy == popart.AutodiffStitchStrategy.RecomputeAllNonInputs
    with pytest.raises(AttributeError, match="no attribute 'factr'"):
        b.factr = 2
    with pytest.raises(TypeError, match="at most 2 arguments"):
        popart.AccumulateOuterFragmentSettings(1, [], 3)
    # the default lists are not shared between structures
    popart.AccumulateOuterFragmentSettings().excludedVirtualGraphs.append(1)
    assert popart.AccumulateOuterFragmentSettings().excludedVirtualGraphs == []


def test_enum_numbering_is_popart():
    assert int(popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized) == 3
    assert int(popart.BatchSerializationMethod.Loop) == 2
    assert int(popart.ExecutionPhaseSchedule.BatchClusteredIO) == 2
    assert int(popart.RecomputationType.Pipeline) == 3 and int(popart.RecomputationType.RecomputeAll) == 4


def test_a_session_with_the_settings_set_runs_and_warns_once(monkeypatch):
    monkeypatch.setattr(popart.options, "_warned", set())  # fields warned about earlier in this process
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    y = b.aiOnnx.relu([x])
    opts = popart.SessionOptions()
    opts.accumulateOuterFragmentSettings = popart.AccumulateOuterFragmentSettings(
        popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized, [0])
    opts.batchSerializationSettings.factor = 1
    assert set(opts._changed()) == {"accumulateOuterFragmentSettings", "batchSerializationSettings"}
    with pytest.warns(UserWarning, match="accumulateOuterFragmentSettings is recorded"):
        s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, {y: popart.AnchorReturnType("All")}),
                                    device(tiles=4), userOptions=opts)
    s.prepareDevice()
    out = s.initAnchorArrays()
    xv = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    s.run(popart.PyStepIO({x: xv}, out))
    np.testing.assert_array_equal(out[y], np.maximum(xv, 0))
