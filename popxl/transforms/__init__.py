"""IR-to-IR transforms of PopXL: autodiff, decompose_sum, merge_exchange and io_tile_exchange."""
from . import grad_rules
from .autodiff import ExpectedConnection, ExpectedConnectionType, GradGraphInfo, autodiff
from .decompose_sum import decompose_sum
from .merge_exchange import io_tile_exchange, merge_exchange

__all__ = ["autodiff", "GradGraphInfo", "ExpectedConnection", "ExpectedConnectionType", "decompose_sum",
           "merge_exchange", "io_tile_exchange", "grad_rules"]
