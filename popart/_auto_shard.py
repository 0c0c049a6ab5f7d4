"""VirtualGraphMode.Auto: place a model's ops on the IPUs of a replica."""
from __future__ import annotations

import onnx

from ._model import ModelIO


def auto_virtual_graphs(model: onnx.ModelProto, io: ModelIO, ipus: int) -> bool:
    """VirtualGraphMode.Auto: split the ops, in their (topological) order, into `ipus` contiguous
    shards of about equal cost (one unit per op plus one per 1024 weight elements it reads), as
    PopART's auto-sharding splits the forward graph. Sets each node's virtual graph (and pipeline
    stage) on the session's copy of the model; returns whether the model is placed."""
    if ipus <= 1:
        return False
    nodes = list(model.graph.node)
    cost = [1.0 + sum(io.initializers[t].size for t in n.input if io.is_weight(t)) / 1024 for n in nodes]
    total, run = sum(cost), 0.0
    for n, c in zip(nodes, cost):
        ipu = min(ipus - 1, int(run * ipus / total))
        run += c
        for a in list(n.attribute):
            if a.name in ("__ipu_number", "__pipeline_stage"):
                n.attribute.remove(a)
        n.attribute.extend([onnx.helper.make_attribute("__ipu_number", ipu),
                            onnx.helper.make_attribute("__pipeline_stage", ipu)])
    return True


def execution_phase_virtual_graphs(model: onnx.ModelProto, stages: int) -> bool:
    """VirtualGraphMode.ExecutionPhases: each op runs on virtual graph (its execution phase) mod
    `stages`, as PopART's streaming-memory transform places phases (an op with both a phase and a
    virtual graph must agree with that rule: PopART's 'inconsistent execution phase' error). An op
    without a phase takes the latest phase of the ops producing its inputs (phase 0 when none do),
    as PopART's placement sanitising does. Sets each node's virtual graph on the session's copy of
    the model; returns whether the model is placed (more than one stage)."""
    from .errors import popart_exception
    stages = max(1, int(stages))
    phase_of: dict = {}
    for n in model.graph.node:
        attrs = {a.name: a for a in n.attribute}
        if "__execution_phase" in attrs:
            phase = int(attrs["__execution_phase"].i)
        else:
            phase = max((phase_of[t] for t in n.input if t in phase_of), default=0)
        for t in n.output:
            phase_of[t] = phase
        if "__ipu_number" in attrs:
            vgid = int(attrs["__ipu_number"].i)
            if vgid % stages != phase % stages:
                raise popart_exception(f"[StreamingMemory] Op {n.name or n.op_type} inconsistent execution phase "
                                       f"{phase} and virtual graph ID {vgid}")
            n.attribute.remove(attrs["__ipu_number"])
        if stages > 1:
            n.attribute.append(onnx.helper.make_attribute("__ipu_number", phase % stages))
    return stages > 1
