"""The family of custom ops (popxl/custom_op.py): op types a user registers with
`popxl.custom_op.register_custom_op`, recorded with `MyOp.create(*inputs, **attrs)`."""
from popxl.custom_op import CustomOp, register_custom_op

__all__ = ["CustomOp", "register_custom_op"]
