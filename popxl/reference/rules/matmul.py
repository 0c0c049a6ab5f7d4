"""matmul: NumPy's matmul rules; float16 operands multiply into float32 partials (the AMP) and the
result is rounded once to the output type."""
import numpy as np

from ..registry import reference_rule
from ._util import wide


@reference_rule("matmul")
def matmul(ctx, op, ins):
    a, b = ins
    return [np.matmul(wide(a), wide(b)).astype(ctx.out_dtype())]
