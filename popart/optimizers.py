"""PopART's optimizers: hyper-parameter containers (SGD, ConstSGD, Adam, Adaptive).

Each hyper-parameter is an `OptimizerValue` (a value and whether it is constant). Constant values
are compiled into the program; non-constant ones live on the device in scalar variables, so
`session.updateOptimizerFromHost(new_optimizer)` changes them without recompiling (constant ones
must keep their values, as PopART requires). Per-weight values come from `insertSpecific`.
The update formulas are built in popart/_optimizer_updates.py.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from ._enum import PybindEnum
from .errors import popart_exception


class OptimizerValue:
    def __init__(self, val: float = 0.0, isConst: bool = True):  # noqa: N803
        if isinstance(val, tuple):
            val, isConst = val  # noqa: N806
        self._val, self._const = float(val), bool(isConst)

    def val(self) -> float:
        return self._val

    def isConst(self) -> bool:  # noqa: N802
        return self._const

    def __eq__(self, other) -> bool:
        return isinstance(other, OptimizerValue) and (self._val, self._const) == (other._val, other._const)

    def __repr__(self) -> str:
        return f"OptimizerValue({self._val}, isConst={self._const})"


class OptimizerValueMap:
    def __init__(self, default: OptimizerValue, specific: Dict[str, OptimizerValue]):
        self._default, self._specific = default, specific

    def getDefault(self) -> OptimizerValue:  # noqa: N802
        return self._default

    def get(self, weight: str) -> OptimizerValue:
        return self._specific.get(weight, self._default)

    def hasSpecific(self, weight: str) -> bool:  # noqa: N802
        return weight in self._specific


class WeightDecayMode(PybindEnum):
    Decay = 0
    L2Regularization = 1


class AdamMode(PybindEnum):
    Adam = 0
    AdamNoBias = 1
    AdaMax = 2
    Lamb = 3
    LambNoBias = 4


class AdaptiveMode(PybindEnum):
    AdaGrad = 0
    RMSProp = 1
    CenteredRMSProp = 2
    AdaDelta = 3


class SGDAccumulatorAndMomentum(PybindEnum):
    Combined = 0
    Separate = 1


class ClipNormSettings:
    def __init__(self, weightIds: List[str], maxNorm: float):  # noqa: N803
        self.weightIds, self.maxNorm = list(weightIds), float(maxNorm)

    @staticmethod
    def clipWeights(weightIds: List[str], maxNorm: float) -> "ClipNormSettings":  # noqa: N802,N803
        return ClipNormSettings(weightIds, maxNorm)

    @staticmethod
    def clipAllWeights(maxNorm: float) -> "ClipNormSettings":  # noqa: N802,N803
        return ClipNormSettings([], maxNorm)


def _value(v) -> OptimizerValue:
    if isinstance(v, OptimizerValue):
        return v
    if isinstance(v, tuple) and len(v) == 2:
        return OptimizerValue(float(v[0]), bool(v[1]))
    if isinstance(v, (int, float)):
        return OptimizerValue(float(v), True)
    raise popart_exception(f"An optimizer value must be (value, isConst) or a number, not {v!r}")


class Optimizer:
    """The common part: a dict of named hyper-parameters (defaults and per-weight values)."""

    kind = "optimizer"
    # hyper-parameter name -> default value; "default<Name>" in the constructor dict, "<name>" in
    # insertSpecific
    PARAMS: Dict[str, float] = {}
    GLOBAL = ("lossScaling",)

    def __init__(self, values: Optional[dict] = None, clipNormSettings: Iterable[ClipNormSettings] = ()):  # noqa: N803
        values = _values_dict(self, values)
        self._defaults: Dict[str, OptimizerValue] = {}
        for name, d in self.PARAMS.items():
            key = name if name in self.GLOBAL else "default" + name[0].upper() + name[1:]
            if key in values:
                self._defaults[name] = _value(values.pop(key))
            else:
                self._defaults[name] = OptimizerValue(d, True)
        if values:
            allowed = [n if n in self.GLOBAL else "default" + n[0].upper() + n[1:] for n in self.PARAMS]
            raise popart_exception(f"{type(self).__name__}: unknown hyper-parameter(s) {sorted(values)}; "
                                   f"known: {allowed}")
        self._specific: Dict[str, Dict[str, OptimizerValue]] = {}
        self.clipNormSettings = list(clipNormSettings or [])
        if self.clipNormSettings:
            raise popart_exception("clipNormSettings (gradient clipping by norm) are not supported by the simulator's "
                                   "PopART frontend yet")

    def insertSpecific(self, weightId: str, values: dict) -> None:  # noqa: N802,N803
        spec = {}
        for k, v in values.items():
            if k not in self.PARAMS or k in self.GLOBAL:
                raise popart_exception(f"{type(self).__name__}.insertSpecific: unknown per-weight hyper-parameter "
                                       f"{k!r}; known: {[p for p in self.PARAMS if p not in self.GLOBAL]}")
            spec[k] = _value(v)
        self._specific.setdefault(weightId, {}).update(spec)

    def hasSpecific(self, weightId: str = None) -> bool:  # noqa: N802,N803
        return bool(self._specific) if weightId is None else weightId in self._specific

    def value(self, name: str, weight: Optional[str] = None) -> OptimizerValue:
        if weight is not None and name in self._specific.get(weight, {}):
            return self._specific[weight][name]
        return self._defaults[name]

    def _map(self, name: str) -> OptimizerValueMap:
        return OptimizerValueMap(self._defaults[name], {w: s[name] for w, s in self._specific.items() if name in s})

    def getLossScalingVal(self) -> float:  # noqa: N802
        return self._defaults["lossScaling"].val()

    def lossScaling(self) -> OptimizerValue:  # noqa: N802
        return self._defaults["lossScaling"]

    def structure(self) -> tuple:
        """What must not change in updateOptimizerFromHost: the kind, modes and constant values."""
        consts = tuple(sorted((n, v.val()) for n, v in self._defaults.items() if v.isConst()))
        spec = tuple(sorted((w, n, v.val() if v.isConst() else None, v.isConst())
                            for w, s in self._specific.items() for n, v in s.items()))
        nonconst = tuple(sorted(n for n, v in self._defaults.items() if not v.isConst()))
        return (type(self).__name__, self._modes(), consts, nonconst, spec)

    def _modes(self) -> tuple:
        return ()


def _values_dict(opt, values) -> dict:
    """The optimizer-value dictionary PopART's SGD / Adam / Adaptive bindings take (their only
    constructor); anything else is pybind's TypeError."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise TypeError(f"{type(opt).__name__}.__init__(): incompatible constructor arguments: the first argument "
                        f"is a dict of optimizer values such as {{'defaultLearningRate': (0.01, False)}}, not "
                        f"{values!r} (popart.ConstSGD(0.01) takes a bare learning rate)")
    return dict(values)


class SGD(Optimizer):
    """v' = mm v + (1 - dm)(g + wd w); w' = w - lr v' (nesterov: w' = w - lr (g + wd w + mm v')),
    velocity stored scaled by vs, g the gradient with the loss scaling removed."""

    kind = "sgd"
    PARAMS = {"learningRate": 0.1, "weightDecay": 0.0, "momentum": 0.0, "dampening": 0.0, "velocityScaling": 1.0,
              "nesterov": 0.0, "lossScaling": 1.0}

    def __init__(self, values: Optional[dict] = None, clipNormSettings=(),  # noqa: N803
                 accumulatorAndMomentum=SGDAccumulatorAndMomentum.Combined, accumType=None,  # noqa: N803
                 accl1Type=None, debug_context=""):  # noqa: N803
        values = _values_dict(self, values)
        if "nesterov" in values:  # PopART's key for the default
            values["defaultNesterov"] = values.pop("nesterov")
        if isinstance(values.get("defaultNesterov"), bool):
            values["defaultNesterov"] = (1.0 if values["defaultNesterov"] else 0.0, True)
        super().__init__(values, clipNormSettings)
        self.accumulatorAndMomentum = accumulatorAndMomentum

    def learningRates(self) -> OptimizerValueMap:  # noqa: N802
        return self._map("learningRate")

    def weightDecays(self) -> OptimizerValueMap:  # noqa: N802
        return self._map("weightDecay")

    def momentums(self) -> OptimizerValueMap:  # noqa: N802
        return self._map("momentum")

    def dampenings(self) -> OptimizerValueMap:  # noqa: N802
        return self._map("dampening")

    def velocityScalings(self) -> OptimizerValueMap:  # noqa: N802
        return self._map("velocityScaling")

    def nesterov(self) -> OptimizerValueMap:
        return self._map("nesterov")

    def needs_velocity(self, weight: str) -> bool:
        mm = self.value("momentum", weight)
        return not mm.isConst() or mm.val() != 0.0


class ConstSGD(SGD):
    """SGD with constant learning rate, weight decay and loss scaling (and no momentum)."""

    def __init__(self, learning_rate: float, weight_decay: float = 0.0, loss_scaling: float = 1.0,
                 clip_norm_settings=()):
        super().__init__({"defaultLearningRate": (learning_rate, True), "defaultWeightDecay": (weight_decay, True),
                          "lossScaling": (loss_scaling, True)}, clip_norm_settings)


class Adam(Optimizer):
    """Adam / AdamW / AdamNoBias, Lamb / LambNoBias and AdaMax (seed 002's formulas; AdaMax as
    popxl's adamax_updater: m_hat / (v + eps), v' = max(b2 v, |g|))."""

    kind = "adam"
    PARAMS = {"learningRate": 0.1, "weightDecay": 0.0, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6,
              "maxWeightNorm": 65504.0, "lossScaling": 1.0}

    def __init__(self, values: Optional[dict] = None, mode: AdamMode = AdamMode.Adam,
                 weight_decay_mode: WeightDecayMode = WeightDecayMode.Decay, accum_type=None, accl1_type=None,
                 accl2_type=None, clipNormSettings=(), scaled_optimizer_state: bool = False, debug_context=""):  # noqa: N803
        super().__init__(values, clipNormSettings)
        if not isinstance(mode, AdamMode):
            raise popart_exception(f"Adam mode must be a popart.AdamMode, not {mode!r}")
        self.mode, self.weight_decay_mode = mode, weight_decay_mode
        self.scaled_optimizer_state = scaled_optimizer_state

    def _modes(self):
        return (self.mode, self.weight_decay_mode)

    def learningRates(self):  # noqa: N802
        return self._map("learningRate")

    def weightDecays(self):  # noqa: N802
        return self._map("weightDecay")

    def beta1s(self):
        return self._map("beta1")

    def beta2s(self):
        return self._map("beta2")

    def epss(self):
        return self._map("eps")

    def maxWeightNorms(self):  # noqa: N802
        return self._map("maxWeightNorm")


class Adaptive(Optimizer):
    """AdaGrad, RMSProp, CenteredRMSProp, AdaDelta, with optional momentum."""

    kind = "adaptive"
    PARAMS = {"learningRate": 0.1, "weightDecay": 0.0, "alpha": 0.99, "momentum": 0.0, "eps": 1e-6,
              "lossScaling": 1.0}

    def __init__(self, values: Optional[dict] = None, mode: AdaptiveMode = AdaptiveMode.RMSProp,
                 weight_decay_mode: WeightDecayMode = WeightDecayMode.L2Regularization, accum_type=None,
                 accl1_type=None, accl2_type=None, accl3_type=None, rmspropTFVariant: bool = False,  # noqa: N803
                 debug_context=""):
        super().__init__(values)
        if not isinstance(mode, AdaptiveMode):
            raise popart_exception(f"Adaptive mode must be a popart.AdaptiveMode, not {mode!r}")
        self.mode, self.weight_decay_mode, self.rmspropTFVariant = mode, weight_decay_mode, rmspropTFVariant

    def _modes(self):
        return (self.mode, self.weight_decay_mode, self.rmspropTFVariant)

    def learningRates(self):  # noqa: N802
        return self._map("learningRate")

    def weightDecays(self):  # noqa: N802
        return self._map("weightDecay")

    def alphas(self):
        return self._map("alpha")

    def momentums(self):
        return self._map("momentum")

    def epss(self):
        return self._map("eps")
