"""Which forward ops a training session recomputes in the backward pass (PopART's implicit
recomputation: SessionOptions.autoRecomputation and Builder.recomputeOutputInBackwardPass).

The rules are PopART's (willow/src/recompute.cpp, intervals.cpp, Graph::getLiveSets), applied to the
ops each frontend node became in the forward graph (an ONNX node for PopART, a captured torch node for
PopTorch: `Marked`); every op of a node takes the node's annotation:

- user annotations: a node whose ``__recompute_output_in_backward_pass`` attribute is
  RecomputeType.Recompute (2) is recomputed, Checkpoint (1) is kept (Builder.checkpointOutput);
  with no automatic mode they are the only ones recomputed;
- NormOnly: the normalisations on a path to the loss (BatchNormalization, GroupNormalization,
  InstanceNormalization, LayerNormalization: PopART's Op::isNorm) are recomputed, nothing else
  (user annotations are overwritten, as PopART's annotateNormOnly does);
- Standard (user Recompute annotations stay): the ops on a path to the loss, in schedule order,
  are cut into intervals of decreasing length (sizes K, K-1, ..., 1, then single ops;
  K = floor(0.75 * (floor(sqrt(2N)) - 1)) for N ops); in each interval the point where the outputs
  still waiting for a forward reader take the fewest bytes is a checkpoint (every op live there is
  kept); every other op is recomputed;
- RecomputeAll (and Pipeline, whose rule PopART writes the same way): every op on a path to the loss
  not annotated Checkpoint is recomputed, then the ops between the last checkpoints and the loss are
  kept again (allCheckpointAfterLastCheckpoint: recomputing them would only run them twice in a row).

Ops with side effects, ops that change an input in place, ops calling subgraphs and copies between
IPUs are never recomputed (PopART's Op::canRecompute; its pipelining keeps IpuCopyOps). Recomputed ops run again just before the first backward op
that reads their outputs (popxl/transforms/autodiff.py: autodiff_recomputing; the lowering reruns
the forward op's own programs, ipu.Rerun), so their forward outputs die after their last forward
reader: fewer bytes live, more cycles, the same results.
"""
from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Sequence, Set, Tuple

import onnx

from popxl.op import Op
from popxl.tensor import Tensor

from .errors import popart_exception
from .options import RecomputationType, RecomputeType

RECOMPUTE_ATTRIBUTE = "__recompute_output_in_backward_pass"
NORM_OPS = frozenset({"BatchNormalization", "GroupNormalization", "InstanceNormalization", "LayerNormalization"})
# ops PopART gives a side effect (Op::hasSideEffect: host and remote transfers, prints): never recomputed
SIDE_EFFECT_TYPES = frozenset({"host_load", "host_store", "remote_load", "remote_store", "remote_code_load",
                               "code_copy", "print_tensor"})
NEVER_RECOMPUTED = SIDE_EFFECT_TYPES | {"ipu_copy"}


class Marked(NamedTuple):
    """One frontend node (ONNX or captured torch) with what recomputation reads of it."""
    annotation: int        # its RecomputeType value (Undefined when the user gave none)
    is_norm: bool          # a normalisation (what NormOnly recomputes)
    ops: Sequence[Op]      # the forward ops it became, in schedule order


def from_onnx(node_ops: Sequence[Tuple[onnx.NodeProto, Sequence[Op]]]) -> List[Marked]:
    """PopART's view of ONNX nodes: the annotation attribute, the norm op types."""
    return [Marked(_annotation(node), node.op_type in NORM_OPS, ops) for node, ops in node_ops]


def _annotation(node: onnx.NodeProto) -> int:
    for a in node.attribute:
        if a.name == RECOMPUTE_ATTRIBUTE:
            return int(a.i)
    return RecomputeType.Undefined.value


def can_recompute(op: Op) -> bool:
    return not op.modified and not op.called_graphs and op.type not in NEVER_RECOMPUTED


def decreasing_intervals(n: int) -> List[Tuple[int, int]]:
    """PopART's getDecreasingIntervals(N): [begin, end) intervals of sizes K, K-1, ..., 1 from the
    start, then one per remaining op, with K the largest size for which 1 + ... + K < N, scaled
    by 0.75 (intervals.cpp: 'by computing a bit less ... big (>10%) cycle saving')."""
    if n == 1:
        return [(0, 1)]
    k = int(int(math.sqrt(2.0 * n)) - 1)
    k = int(k * 0.75)
    out, i0, size = [], 0, k
    while i0 + size <= n and size > 0:
        out.append((i0, i0 + size))
        i0 += size
        size -= 1
    while i0 < n:
        out.append((i0, i0 + 1))
        i0 += 1
    return out


def live_sets(fwd_ops: Sequence[Op]) -> List[Set[Op]]:
    """PopART's Graph::getLiveSets: after each op of the schedule, the ops (among ``fwd_ops``)
    whose outputs some later op of ``fwd_ops`` still has to read, the op itself included."""
    waiting: Dict[Op, List[Op]] = {op: [] for op in fwd_ops}
    n_waiting: Dict[Op, int] = {op: 0 for op in fwd_ops}
    for op in fwd_ops:
        for x in op.inputs:
            prod = x._producer
            if prod is not None and prod in n_waiting and prod not in waiting[op]:
                waiting[op].append(prod)
                n_waiting[prod] += 1
    live: Set[Op] = set()
    sets = []
    for op in fwd_ops:
        for earlier in waiting[op]:
            n_waiting[earlier] -= 1
            if n_waiting[earlier] == 0:
                live.discard(earlier)
        live.add(op)
        sets.append(set(live))
    return sets


def _bytes_out(op: Op) -> int:
    return sum(int(o.nelms) * o.dtype.itemsize for o in op.outputs)


def _to_loss(ops: Sequence[Op], loss: Tensor) -> List[Op]:
    """The ops with a path to ``loss``, in schedule order."""
    on_path: Set[Op] = set()
    need = {loss}
    for op in reversed(ops):
        if any(o in need for o in op.outputs):
            on_path.add(op)
            need.update(op.inputs)
    return [op for op in ops if op in on_path]


def _standard(to_loss: Sequence[Op]) -> Set[Op]:
    if not to_loss:
        return set()
    lives = live_sets(to_loss)
    mem = [sum(_bytes_out(op) for op in s) for s in lives]
    checkpoints: Set[Op] = set()
    for b, e in decreasing_intervals(len(to_loss)):
        best = min(range(b, e), key=lambda i: mem[i])  # the first of the lowest, as PopART's strict <
        checkpoints |= lives[best]
    return {op for op in to_loss if op not in checkpoints}


def _checkpoint_after_last_checkpoint(recompute: Set[Op], loss: Tensor) -> None:
    """PopART's allCheckpointAfterLastCheckpoint: from the loss back, recomputed ops become kept
    until a kept op is met (the loss's own op included: its other outputs, a gradient the loss
    computes with it, would otherwise be recomputed right after it)."""
    recompute.discard(loss._producer)
    stack = [loss._producer]
    seen: Set[Op] = set()
    while stack:
        op = stack.pop()
        if op is None or op in seen:
            continue
        seen.add(op)
        for x in op.inputs:
            prod = x._producer
            if prod is not None and prod in recompute:
                recompute.discard(prod)
                stack.append(prod)


def recompute_ops(mode: RecomputationType, nodes: Sequence[Marked], loss: Tensor) -> Set[Op]:
    """The forward ops to recompute under ``autoRecomputation`` = ``mode`` and the nodes' own
    annotations. ``nodes``: each frontend node with the ops it became, in schedule order."""
    mode = RecomputationType(mode)
    ops = [op for n in nodes for op in n.ops]
    annotation = {op: n.annotation for n in nodes for op in n.ops}
    norm = {op for n in nodes if n.is_norm for op in n.ops}
    to_loss = _to_loss(ops, loss)
    if mode == RecomputationType.NoRecompute:
        chosen = {op for op in ops if annotation[op] == RecomputeType.Recompute.value}
    elif mode == RecomputationType.NormOnly:
        chosen = {op for op in to_loss if op in norm}
    elif mode == RecomputationType.Standard:  # the checkpoints keep the annotations they had
        chosen = _standard(to_loss) | {op for op in ops if annotation[op] == RecomputeType.Recompute.value}
    elif mode in (RecomputationType.RecomputeAll, RecomputationType.Pipeline):
        chosen = {op for op in to_loss if annotation[op] != RecomputeType.Checkpoint.value}
        chosen |= {op for op in ops if annotation[op] == RecomputeType.Recompute.value}
        _checkpoint_after_last_checkpoint(chosen, loss)
    else:
        raise popart_exception(f"Invalid RecomputationType {mode}")
    return {op for op in chosen if can_recompute(op)}
