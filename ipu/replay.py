"""Recording what a builder adds to a Graph, and replaying it on other variables.

A model's layers build the same pieces again and again: the same matmul over operands with the
same shapes, index views and tile mappings, only on the next layer's variables and under the next
layer's names. A builder's work is a function of those, so what it adds to the graph (variables
and their mappings, compute sets of vertices, changes to its inputs' mappings, the program it
returns) can be recorded once and replayed for the next layer with the variables and the name
prefix swapped: the same calls in the same order (variable and compute set names come out of
`Graph._unique` as they would), the same arrays (shared, never written after they are built), so
the graph, and everything compiled from it, is what the builder would have made.

    key = (view_key(a), view_key(b), ...)          # everything the builder reads
    program = build_or_replay(graph, memo, key, (a.variable, b.variable), prefix, build)

The recording is refused (the builder's result is used, nothing is kept) when the builder does
something a replay would not reproduce: a variable it references that is neither an input nor one
it made, a name outside its prefix, a program kind other than Sequence / Copy / Execute, a graph
object other than variables and compute sets.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np

from .program import Copy, Execute, Program, Sequence
from .tensor import Tensor, Variable

__all__ = ["Recording", "build_or_replay", "mapping_key", "view_key"]


def _digest(*parts) -> bytes:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, np.ndarray):
            h.update(str((p.dtype.str, p.shape)).encode())
            h.update(np.ascontiguousarray(p).data)
        else:
            h.update(repr(p).encode())
        h.update(b"|")
    return h.digest()


def mapping_key(v: Variable, tiles: bool = True) -> bytes:
    """The variable's size, type, category and (with `tiles`) its tile mapping, as it is held:
    pieces or a per-element table."""
    return _digest(v.numel, v.dtype.name, v.category, *(v.mapping_parts() if tiles else ()))


def view_key(t: Tensor, mapping: bool = True) -> bytes:
    """Which elements of its variable a view reads, in which shape, and the variable's
    mapping_key (its tiles only with `mapping`: for a builder that reads no more of it)."""
    return _digest(tuple(t.shape), *t.index_parts(), mapping_key(t.variable, mapping))


@dataclass
class Recording:
    """What one build added, in call order: ("variable", id, asked name, debug, shape, dtype,
    category, mapping state) and ("compute_set", id, asked name, debug, chunks) events; the
    inputs whose mapping it changed, (input position, mapping state); the program it returned,
    as a template over the recorded variables and compute sets."""

    prefix: str
    input_ids: tuple
    events: list
    mapped: list
    program: Program


class _Refused(Exception):
    pass


def _record(graph, inputs: tuple, prefix: str, build):
    """Run build() on `graph`, watching what it adds; returns (program, Recording or None)."""
    calls: list = []
    saved = {k: graph.__dict__.get(k) for k in ("add_variable", "add_compute_set")}
    outer_var, outer_cs = graph.add_variable, graph.add_compute_set

    def add_variable(name, shape, dtype="float32", category="variable", debug=""):
        v = outer_var(name, shape, dtype, category, debug)
        calls.append(("variable", v, name, debug))
        return v

    def add_compute_set(name="cs", debug=""):
        cs = outer_cs(name, debug)
        calls.append(("compute_set", cs, name, debug))
        return cs

    counts = (len(graph.variables), len(graph.compute_sets), len(graph.streams), len(graph.functions),
              len(graph.remote_buffers))
    keys_before = [mapping_key(v) for v in inputs]
    graph.add_variable, graph.add_compute_set = add_variable, add_compute_set
    try:
        program = build()
    finally:
        for k, f in saved.items():
            if f is None:
                graph.__dict__.pop(k, None)
            else:
                graph.__dict__[k] = f
    try:
        made_vars = [c[1] for c in calls if c[0] == "variable"]
        made_cs = [c[1] for c in calls if c[0] == "compute_set"]
        if (graph.variables[counts[0]:] != made_vars or graph.compute_sets[counts[1]:] != made_cs
                or (len(graph.streams), len(graph.functions), len(graph.remote_buffers)) != counts[2:]):
            raise _Refused
        for _, _, name, debug in calls:
            if not name.startswith(prefix) or (debug and not debug.startswith(prefix)):
                raise _Refused
        known = {v.id for v in inputs} | {v.id for v in made_vars}
        events: list = []
        for kind, obj, name, debug in calls:
            if kind == "variable":
                if obj.initial is not None:
                    raise _Refused
                events.append((kind, obj.id, name, debug, obj.shape, obj.dtype, obj.category, obj.mapping_state()))
            else:
                if any(v.id not in known for chunk in obj.chunks for v in chunk.field_vars):
                    raise _Refused
                # the chunks as they are now (a caller may move their tiles afterwards: replace() keeps
                # this view of them)
                events.append((kind, id(obj), name, debug, [replace(c) for c in obj.chunks]))
        template = _template(program, known, {id(cs) for cs in made_cs}, prefix)
        mapped = [(i, v.mapping_state()) for i, (v, k) in enumerate(zip(inputs, keys_before)) if mapping_key(v) != k]
    except _Refused:
        return program, None
    return program, Recording(prefix, tuple(v.id for v in inputs), events, mapped, template)


def _template(p, known: set, made_cs: set, prefix: str) -> Program:
    """A copy of the program tree (its own Sequence lists: later additions to the returned program
    are not part of the recording); refused when it holds anything a replay would not remake."""
    if p.name and not p.name.startswith(prefix):
        raise _Refused
    if type(p) is Sequence:
        return Sequence(*[_template(q, known, made_cs, prefix) for q in p.programs], name=p.name)
    if type(p) is Copy:
        if p.src.variable.id not in known or p.dst.variable.id not in known:
            raise _Refused
        return Copy(p.src, p.dst, name=p.name)
    if type(p) is Execute:
        if id(p.compute_set) not in made_cs:
            raise _Refused
        return Execute(p.compute_set, name=p.name)
    raise _Refused


def _replay(graph, rec: Recording, inputs: tuple, prefix: str) -> Program:
    def rename(name: str) -> str:
        return prefix + name[len(rec.prefix):] if name.startswith(rec.prefix) else name

    var = {old: new for old, new in zip(rec.input_ids, inputs)}
    css: dict = {}
    for event in rec.events:
        kind, old, name, debug = event[:4]
        if kind == "variable":
            shape, dtype, category, state = event[4:]
            v = graph.add_variable(rename(name), shape, dtype, category, rename(debug))
            v.set_mapping_state(state)
            var[old] = v
        else:
            css[old] = graph.add_compute_set(rename(name), rename(debug))
    for event in rec.events:  # (a compute set's vertices may read variables made after it)
        if event[0] == "compute_set":
            css[event[1]].chunks.extend(replace(c, field_vars=tuple(var[v.id] for v in c.field_vars))
                                        for c in event[4])
    for i, state in rec.mapped:
        inputs[i].set_mapping_state(state)

    def view(t: Tensor) -> Tensor:
        if isinstance(t, Variable):
            return var[t.id]
        return t.of_variable(var[t.variable.id])  # the same index object: no new arrays

    def program(p):
        if type(p) is Sequence:
            return Sequence(*[program(q) for q in p.programs], name=rename(p.name))
        if type(p) is Copy:
            return Copy(view(p.src), view(p.dst), name=rename(p.name))
        return Execute(css[id(p.compute_set)], name=rename(p.name))

    return program(rec.program)


def build_or_replay(graph, memo: dict, key, inputs, prefix: str, build) -> Program:
    """build() (which adds to `graph` and returns a program, naming everything under `prefix`),
    or, when `memo` holds a recording under `key`, the same additions replayed on `inputs` (the
    variables build() reads, in the recording's order) under `prefix`. `key` must say everything
    build() reads but the inputs' identities and the prefix (mapping_key, view_key)."""
    inputs = tuple(inputs)
    rec = memo.get(key)
    if rec is not None:
        return _replay(graph, rec, inputs, prefix)
    program, rec = _record(graph, inputs, prefix, build)
    if rec is not None:
        memo[key] = rec
    return program
