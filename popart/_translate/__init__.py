"""ONNX -> popxl IR: one rule per ONNX op type (see context.py for the registry and the node view)."""
from . import control, elementwise, nn, recurrent, shape  # noqa: F401  (registers the rules)
from .context import RULES, Node, Translation, onnx_op, supported_ops

__all__ = ["RULES", "Node", "Translation", "onnx_op", "supported_ops"]
