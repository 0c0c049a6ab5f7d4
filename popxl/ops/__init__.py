"""The ops of PopXL. Each function checks its inputs, infers output shapes and dtypes and records
one or more ``popxl.op.Op`` in the current graph (nothing runs here). See docs/ir.md for the op
types the lowering consumes."""
from . import collectives, var_updates
from .conv import (average_pool, conv, conv_pow2scaled, conv_transpose, conv_transpose_pow2scaled, interpolate,
                   max_pool, roi_align)
from .control import (CallSiteInfo, ConditionalSiteInfo, call, call_with_info, conditional, conditional_with_info,
                      repeat, repeat_with_info)
from .elementwise import (UNARY_FUNCTIONS, abs, add, add_, asin, ceil, clip, cos, div, equal, erf, exp, exp_, floor,
                          fmod, gelu, gelu_, geluerf, geluerf_, greater, increment_mod, increment_mod_, isfinite, isinf,
                          isnan, less, log, log2, logical_and, logical_not, logical_or, maximum, minimum, mul, negate,
                          not_equal, pow, reciprocal, relu, relu_, scaled_add, scaled_add_, sigmoid, sigmoid_, sign,
                          sin, sqrt, sub, swish, swish_, tanh, where)
from .host_io import code_copy, host_load, host_store, remote_code_load, remote_load, remote_load_, remote_store
from .indexing import (dynamic_slice, dynamic_update, dynamic_update_, gather, grouped_scatter_reduce, groupedgather,
                       onehot, scatter, scatter_reduce, tied_gather)
from .matmul import matmul, matmul_pow2scaled
from .misc import (cast, cast_then_pow2scale, detach, detach_, histogram, identity, init, io_tile_copy, ipu_copy,
                   pow2scale_cast_from_fp8, pow2scale_cast_to_fp8, pow2scale_then_cast, print_tensor)
from .nn import (batch_norm_inference, group_norm, lamb_square, layer_norm, nll_loss, nll_loss_with_softmax_grad,
                 softmax)
from .random import create_random_seed, dropout, random_normal, random_uniform, shaped_dropout, split_random_seed
from .reduce import (argmax, argmin, cumsum, l1, l2, logsum, logsumexp, max, mean, median, min, prod, sum, sumsquare,
                     topk)
from .shape import (concat, concat_, flatten, flatten_, reshape, reshape_, slice, slice_, split, squeeze, subsample,
                    transpose, transpose_)

__all__ = [
    # elementwise (a unary op registered later is added below)
    "add", "add_", "clip", "div", "equal", "fmod", "greater", "increment_mod", "increment_mod_", "less", "log2",
    "logical_and", "logical_or", "maximum", "minimum", "mul", "not_equal", "pow", "scaled_add", "scaled_add_", "sub",
    "where",
    # the unary ops of the op table
    "abs", "asin", "ceil", "cos", "erf", "exp", "exp_", "floor", "gelu", "gelu_", "geluerf", "geluerf_", "isfinite",
    "isinf", "isnan", "log", "logical_not", "negate", "reciprocal", "relu", "relu_", "sigmoid", "sigmoid_", "sign",
    "sin", "sqrt", "swish", "swish_", "tanh",
    # reductions
    "argmax", "argmin", "cumsum", "l1", "l2", "logsum", "logsumexp", "max", "mean", "median", "min", "prod", "sum",
    "sumsquare", "topk",
    # layout and indexing
    "concat", "concat_", "flatten", "flatten_", "reshape", "reshape_", "slice", "slice_", "split", "squeeze",
    "subsample", "transpose", "transpose_", "dynamic_slice", "dynamic_update", "dynamic_update_", "gather",
    "grouped_scatter_reduce", "groupedgather", "onehot", "scatter", "scatter_reduce", "tied_gather",
    # nn
    "matmul", "matmul_pow2scaled", "average_pool", "conv", "conv_pow2scaled", "conv_transpose",
    "conv_transpose_pow2scaled", "interpolate", "max_pool", "roi_align", "batch_norm_inference", "group_norm",
    "lamb_square", "layer_norm", "nll_loss", "nll_loss_with_softmax_grad", "softmax",
    # random
    "create_random_seed", "dropout", "random_normal", "random_uniform", "shaped_dropout", "split_random_seed",
    # misc
    "cast", "cast_then_pow2scale", "detach", "detach_", "histogram", "identity", "init", "io_tile_copy", "ipu_copy",
    "pow2scale_cast_from_fp8", "pow2scale_cast_to_fp8", "pow2scale_then_cast", "print_tensor",
    # data movement
    "code_copy", "host_load", "host_store", "remote_code_load", "remote_load", "remote_load_", "remote_store",
    # control flow
    "CallSiteInfo", "ConditionalSiteInfo", "call", "call_with_info", "conditional", "conditional_with_info", "repeat",
    "repeat_with_info",
    # sub-packages
    "collectives", "var_updates",
]
# a unary op registered in popxl.op_table before this import finished (one registered later is
# added by popxl.ops.elementwise)
globals().update(UNARY_FUNCTIONS)
__all__ += [name for name in UNARY_FUNCTIONS if name not in __all__]

from . import _module_paths  # noqa: E402

_module_paths.install(__import__(__name__, fromlist=["__all__"]))
