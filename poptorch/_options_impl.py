"""The dictionary behind every PopTorch options class, and the stage manager that gives each
Block a Stage while a model is captured."""
from __future__ import annotations

import copy
from typing import Any, Dict, Optional

from .errors import Error


class OptionsDict:
    """Named option values, read as attributes (`opts.device_iterations`). `set` changes an
    existing value, `createOrSet` may add one; a frozen dictionary (the options a model was
    wrapped with) refuses changes."""

    def __init__(self, **defaults: Any) -> None:
        object.__setattr__(self, "_values", dict(defaults))
        object.__setattr__(self, "_is_frozen", False)
        object.__setattr__(self, "_warnings_disabled", set())

    def _freeze(self) -> None:
        object.__setattr__(self, "_is_frozen", True)
        for v in vars(self).values():
            if isinstance(v, OptionsDict):
                v._freeze()

    def _unfreeze(self) -> None:
        object.__setattr__(self, "_is_frozen", False)
        for v in vars(self).values():
            if isinstance(v, OptionsDict):
                v._unfreeze()

    def checkIsFrozen(self) -> None:  # noqa: N802
        if self._is_frozen:
            raise AttributeError("Can't modify frozen Options")

    def set(self, **kwargs: Any) -> None:
        self.checkIsFrozen()
        for k, v in kwargs.items():
            if k not in self._values:
                raise ValueError(f"Invalid option {k}, valid options are {sorted(self._values)}")
            self._values[k] = v

    def createOrSet(self, **kwargs: Any) -> None:  # noqa: N802
        self.checkIsFrozen()
        self._values.update(kwargs)

    def deleteIfExists(self, name: str) -> None:  # noqa: N802
        self.checkIsFrozen()
        self._values.pop(name, None)

    def exists(self, name: str) -> bool:
        return name in self._values

    def update(self, other: Dict[str, Any]) -> Dict[str, Any]:
        out = dict(other)
        out.update(self._values)
        return out

    def toDict(self) -> Dict[str, Any]:  # noqa: N802
        return dict(self._values)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(f"{type(self).__name__} has no option or attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            self.set(**{name: value})
        else:
            object.__setattr__(self, name, value)

    def __deepcopy__(self, memo):
        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in vars(self).items():
            object.__setattr__(new, k, False if k == "_is_frozen" else copy.deepcopy(v, memo))
        return new

    def __getstate__(self):
        return dict(vars(self))

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"{type(self).__name__}({body})"


class IStageManager:
    """Assigns blocks to stages while a model is captured (PopTorch's interface): `beginStage`
    is called when a Block starts, `getStage` maps a block id to its Stage."""

    def __init__(self) -> None:
        self._next_auto_id = 0
        self._current_ipu: Optional[int] = None
        self._blocks_seen: Dict[str, Any] = {}
        self.on_stage = None  # the capture's callback: (user_id, Stage, ipu) when a block starts

    def clearDebug(self) -> None:  # noqa: N802
        self._blocks_seen = {}

    def printDebug(self) -> None:  # noqa: N802
        from ._logging import logger
        for block, (stage, ipu) in self._blocks_seen.items():
            logger.debug("block %s: stage %s on IPU %s", block, stage, ipu)

    def resetAutoId(self) -> None:  # noqa: N802
        self._next_auto_id = 0

    def nextAutoId(self) -> str:  # noqa: N802
        v = str(self._next_auto_id)
        self._next_auto_id += 1
        return v

    def getStage(self, block_id: str):  # noqa: N802
        raise NotImplementedError

    def beginStage(self, user_id: Optional[str], ipu_id: Optional[int]) -> None:  # noqa: N802
        if user_id is None:
            user_id = self.nextAutoId()
        user_id = str(user_id)
        self._current_ipu = ipu_id
        stage = self.getStage(user_id)
        # an explicit Stage(...).ipu(n) wins, then the block's ipu_id, then the stage's number
        # (PipelinedExecution("A", "B") puts stage k on IPU k)
        ipu = stage._ipu if stage._ipu is not None else ipu_id if ipu_id is not None else stage._stage_id
        if ipu is None or ipu < 0:
            raise Error(f"Block '{user_id}' has no IPU: give it one with poptorch.Block('{user_id}', ipu_id=N), "
                        f"poptorch.BeginBlock(layer, '{user_id}', ipu_id=N) or poptorch.Stage('{user_id}').ipu(N)")
        self._blocks_seen[user_id] = (stage._stage_id, ipu)
        if self.on_stage is not None:
            self.on_stage(user_id, stage, ipu)
