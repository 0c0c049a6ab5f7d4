"""PopXL's one-file-per-op module paths (`from popxl.ops.call import CallSiteInfo`,
`import popxl.ops.gelu`), which scripts import from, mapped onto this package's op families.

Each path becomes a module in sys.modules holding the public names of its family module (and of
popxl.ops), so imports written for Graphcore's SDK resolve unchanged.
"""
import importlib
import sys
import types

_FAMILIES = {
    "elementwise": ("abs", "add", "ceil", "clip", "cos", "div", "equal", "exp", "floor", "fmod", "gelu", "geluerf",
                    "greater", "increment_mod", "isfinite", "isinf", "isnan", "log", "logical_and", "logical_not",
                    "logical_or", "mul", "negate", "pow", "relu", "scaled_add", "sign", "sin", "sqrt", "sub",
                    "swish", "tanh", "where"),
    "reduce": ("argminmax", "cumsum", "l1", "l2", "logsum", "logsumexp", "max", "mean", "median", "min", "prod",
               "sum", "sumsquare", "topk"),
    "nn": ("batch_norm", "group_norm", "negative_log_likelihood", "softmax", "lamb"),
    "control": ("call", "conditional", "repeat"),
    "misc": ("cast", "detach", "histogram", "identity", "init", "io_tile_copy", "ipu_copy", "print_tensor"),
    "host_io": ("code_copy", "host_load", "host_store", "remote_load", "remote_store"),
    "shape": ("concat", "reshape", "slice", "split", "squeeze", "subsample", "transpose"),
    "conv": ("conv", "pool", "interpolate", "roialign"),
    "random": ("dropout", "random", "random_seed", "shaped_dropout"),
    "indexing": ("dynamic_slice", "dynamic_update", "gather", "onehot", "scatter", "scatter_reduce"),
}


def install(package: types.ModuleType) -> None:
    common = {name: getattr(package, name) for name in package.__all__}
    for family, paths in _FAMILIES.items():
        fam = importlib.import_module(f"{package.__name__}.{family}")
        names = {k: v for k, v in vars(fam).items() if not k.startswith("_")}
        for path in paths:
            full = f"{package.__name__}.{path}"
            if full in sys.modules:
                continue
            mod = types.ModuleType(full, f"PopXL's {full} path: the ops of {fam.__name__}.")
            mod.__dict__.update(common)
            mod.__dict__.update(names)
            sys.modules[full] = mod
