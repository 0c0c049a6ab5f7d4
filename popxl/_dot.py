"""Graphviz DOT files of an Ir (``Ir.dot_checkpoint``), named and split as PopART writes them.

PopART's dot visualiser walks the op schedule of every graph, keeps the ops from ``firstDotOp`` to
``finalDotOp`` and writes them to ``<logDir>/<check>_<name>.dot``: one file per graph that has a
kept op when ``separateCallOpPdfs`` is on (its default), named ``r`` for the main graph and by the
graph id otherwise (the text in brackets when the id has some), or all in ``<check>_all.dot``
when it is off. The drawing inside is our own (clusters per graph, tensors and ops).
"""

from typing import TYPE_CHECKING, Dict, List, Tuple

from popxl.tensor import Constant, Variable

if TYPE_CHECKING:
    from popxl.graph import Graph
    from popxl.ir import Ir
    from popxl.op import Op

__all__ = ["dot_files", "ir_to_dot"]


def _q(text: object) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def file_key(graph: "Graph") -> str:
    """PopART's abridged graph name: ``r`` for the main graph, else what is inside its first
    brackets, else the whole id."""
    if graph.is_main_graph:
        return "r"
    gid = graph.id
    a, b = gid.find("("), gid.find(")")
    return gid[a + 1:b] if 0 <= a < b else gid


def dot_files(ir: "Ir", check: str, opts) -> Dict[str, str]:
    """{file name: DOT text} for one checkpoint, following the session options `opts`."""
    schedule: List[Tuple["Graph", "Op"]] = [(g, op) for g in ir.graphs for op in g._ops]
    first = max(0, int(getattr(opts, "firstDotOp", 0)))
    final = min(int(getattr(opts, "finalDotOp", 10000)), len(schedule))
    if not first < final and schedule:
        raise RuntimeError(f"Invalid dot range ({getattr(opts, 'firstDotOp', 0)}, "
                           f"{getattr(opts, 'finalDotOp', 10000)}) with schedule of size {len(schedule)}, "
                           "as no Ops will be exported to the .dot file")
    separate = bool(getattr(opts, "separateCallOpPdfs", True))
    files: Dict[str, List[Tuple["Graph", List["Op"]]]] = {}
    for g, op in schedule[first:final]:
        parts = files.setdefault(file_key(g) if separate else "all", [])
        if not parts or parts[-1][0] is not g:
            parts.append((g, []))
        parts[-1][1].append(op)
    return {f"{check}_{key}.dot": ir_to_dot(ir, check, parts) for key, parts in files.items()}


def ir_to_dot(ir: "Ir", check: str = "", parts=None) -> str:
    """One digraph of the given (graph, ops) parts (default: every graph and op): each graph a
    cluster with the tensors its ops touch (ellipses), its ops (boxes), data edges, dashed edges
    from calling ops to the graphs they call (when drawn here) and dotted in_sequence edges."""
    if parts is None:
        parts = [(g, list(g._ops)) for g in ir.graphs]
    lines: List[str] = [f"digraph {_q('ir' + str(ir.id) + ('_' + check if check else ''))} {{",
                        "  compound=true;", "  node [fontsize=10];"]
    anchor = {id(g): f"g{gi}" for gi, (g, _) in enumerate(parts)}
    op_node = {id(op): f"op{op.id}" for _, ops in parts for op in ops}
    tensor_node: Dict[int, str] = {}
    for gi, (g, ops) in enumerate(parts):
        used = {id(t) for op in ops for t in (*op.inputs, *op.outputs)}
        for ti, t in enumerate(g.tensors):
            if id(t) in used:
                tensor_node[id(t)] = f"g{gi}_t{ti}"

    for gi, (g, ops) in enumerate(parts):
        title = "main_graph" if g.is_main_graph else g.id
        lines.append(f"  subgraph cluster_{gi} {{")
        lines.append(f"    label={_q(title)};")
        lines.append(f"    {anchor[id(g)]} [shape=point, label={_q(title)}];")
        inputs = {id(t): i for i, t in enumerate(g.inputs)}
        outputs = {id(t): i for i, t in enumerate(g.outputs)}
        for t in g.tensors:
            if id(t) not in tensor_node:
                continue
            label = f"{t.name}\n{t.dtype.name} {list(t.shape)}"
            style = ""
            if isinstance(t, Variable):
                style = ", style=filled, fillcolor=lightblue"
            elif isinstance(t, Constant):
                style = ", style=filled, fillcolor=lightyellow"
            elif id(t) in inputs:
                label = f"in{inputs[id(t)]}: " + label
                style = ", style=filled, fillcolor=palegreen"
            if id(t) in outputs:
                label += f"\n(out{outputs[id(t)]})"
                style = style or ", style=bold"
            lines.append(f"    {tensor_node[id(t)]} [shape=ellipse, label={_q(label)}{style}];")
        for op in ops:
            called = "".join(f"<{c.id}>" for c in op.called_graphs)  # PopART labels calls Call<graph>
            label = f"{op.type}{'_' if op.inplace and op.modified else ''}{called}\n{op.name}"
            lines.append(f"    {op_node[id(op)]} [shape=box, label={_q(label)}];")
        lines.append("  }")

    for _, ops in parts:
        for op in ops:
            node = op_node[id(op)]
            for i, t in enumerate(op.inputs):
                lines.append(f"  {tensor_node[id(t)]} -> {node} [label={_q(i)}];")
            for i, t in enumerate(op.outputs):
                lines.append(f"  {node} -> {tensor_node[id(t)]} [label={_q(i)}];")
            for c in op.called_graphs:
                if id(c) in anchor:
                    lines.append(f"  {node} -> {anchor[id(c)]} [style=dashed, color=gray];")
            for before in op.after:
                if id(before) in op_node:
                    lines.append(f"  {op_node[id(before)]} -> {node} [style=dotted, color=red];")
    lines.append("}")
    return "\n".join(lines) + "\n"
