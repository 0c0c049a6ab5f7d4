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
