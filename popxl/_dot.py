"""Graphviz DOT rendering of an Ir (used by ``Ir.dot_checkpoint``)."""

from typing import TYPE_CHECKING, Dict, List

from popxl.tensor import Constant, Variable

if TYPE_CHECKING:
    from popxl.ir import Ir


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def ir_to_dot(ir: "Ir", check: str = "") -> str:
    """One digraph; each graph of the Ir is a cluster with its tensors (ellipses), ops (boxes),
    data edges, dashed edges from calling ops to the graphs they call and dotted in_sequence edges."""
    lines: List[str] = [f"digraph {_q('ir' + str(ir.id) + ('_' + check if check else ''))} {{",
                        "  compound=true;", "  node [fontsize=10];"]
    tensor_node: Dict[int, str] = {}
    op_node: Dict[int, str] = {}
    anchor: Dict[int, str] = {}
    graphs = ir.graphs
    for gi, g in enumerate(graphs):
        anchor[id(g)] = f"g{gi}"
        for ti, t in enumerate(g.tensors):
            tensor_node[id(t)] = f"g{gi}_t{ti}"
        for op in g._ops:
            op_node[id(op)] = f"op{op.id}"

    for gi, g in enumerate(graphs):
        title = "main_graph" if g.is_main_graph else g.id
        lines.append(f"  subgraph cluster_{gi} {{")
        lines.append(f"    label={_q(title)};")
        lines.append(f"    {anchor[id(g)]} [shape=point, label={_q(title)}];")
        inputs = {id(t): i for i, t in enumerate(g.inputs)}
        outputs = {id(t): i for i, t in enumerate(g.outputs)}
        for t in g.tensors:
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
        for op in g._ops:
            label = f"{op.type}{'_' if op.inplace and op.modified else ''}\n{op.name}"
            lines.append(f"    {op_node[id(op)]} [shape=box, label={_q(label)}];")
        lines.append("  }")

    for g in graphs:
        for op in g._ops:
            node = op_node[id(op)]
            for i, t in enumerate(op.inputs):
                lines.append(f"  {tensor_node[id(t)]} -> {node} [label={_q(i)}];")
            for i, t in enumerate(op.outputs):
                lines.append(f"  {node} -> {tensor_node[id(t)]} [label={_q(i)}];")
            for called in op.called_graphs:
                lines.append(f"  {node} -> {anchor[id(called)]} [style=dashed, color=gray];")
            for before in op.after:
                lines.append(f"  {op_node[id(before)]} -> {node} [style=dotted, color=red];")
    lines.append("}")
    return "\n".join(lines) + "\n"
