"""Large kernel helpers compiled once and called by address, not re-optimised inside every kernel.

A call from one Numba function to another links the callee's LLVM module into the caller's and
optimises and generates the whole again, so a large helper (the 27 loops of the float32 unary ops)
is optimised once for itself, once more in every overload that calls it and once more in every
kernel. `by_address(symbol, signature, body)` compiles the helper once into a C function (a Numba
cfunc, in the kernel cache like the kernels) and binds its address to `symbol`; kernels call it
through the returned intrinsic (arrays passed as their data pointers), which emits only a call
of that symbol, so a cached kernel stays valid in a new process (as codelets/_sgemm.py binds
SciPy's sgemm).

The symbol is bound while Numba types a kernel's call of it (before that kernel's code is
loaded) and, for a kernel loaded from the cache, before its machine code is loaded: the call
leaves a reload hook in the kernel's code library (Numba's `reload_init`, kept with the cached
kernel and inherited by whatever links it), which binds the symbol first. A kernel whose symbol
were left unbound would stop the process when its code loads, so the hooks are part of the code.
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm
from llvmlite import ir
from numba import cfunc, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["by_address", "bind"]

_HELPERS: dict = {}  # symbol -> _Helper


class _Helper:
    def __init__(self, symbol: str, signature, body, options: dict):
        self.symbol = symbol
        self.signature = signature
        self.body = body
        self.options = options
        self.bound = False

    def bind(self) -> None:
        if not self.bound:  # compiled (or loaded from the kernel cache) once per process
            compiled = cfunc(self.signature, cache=True, **self.options)(self.body)
            llvm.add_symbol(self.symbol, compiled.address)
            self.bound = True


def bind(symbol: str) -> None:
    """Bind `symbol` to its helper's compiled code: the reload hook of the kernels that call it (a
    kernel loading from the cache has imported its module, which defined the helpers it calls)."""
    _HELPERS[symbol].bind()


def by_address(symbol: str, signature, body, **options):
    """An intrinsic calling `body` compiled once as a C function of `signature` (a void Numba
    signature of integers, floats and CPointer(dtype)s). The intrinsic takes, for a pointer
    argument, a 1-D C-contiguous array of that dtype (its data pointer is passed; the body makes
    its own carray of the length it is given) and for the others a number of that kind."""
    if symbol in _HELPERS:
        raise ValueError(f"helper symbol {symbol!r} defined twice")
    helper = _Helper(symbol, signature, body, options)
    _HELPERS[symbol] = helper
    reload_hook = functools.partial(bind, symbol)
    params = signature.args

    def accepts(given, wanted) -> bool:
        if isinstance(wanted, types.CPointer):
            return (isinstance(given, types.Array) and given.ndim == 1 and given.layout == "C"
                    and given.dtype == wanted.dtype)
        if isinstance(wanted, types.Integer):
            return isinstance(given, (types.Integer, types.Boolean))
        return isinstance(given, (types.Float, types.Integer))

    def typer(typingctx, *args):
        if len(args) != len(params) or not all(accepts(g, w) for g, w in zip(args, params)):
            return None
        helper.bind()  # before this kernel's code can load
        return types.void(*args), codegen

    def codegen(context, builder, signature, values):
        # Numba's own hook for code that needs set-up before a cached library loads (no public API)
        context.active_code_library._reload_init.add(reload_hook)
        converted = []
        for given, wanted, value in zip(signature.args, params, values):
            if isinstance(wanted, types.CPointer):
                data = context.make_array(given)(context, builder, value).data
                converted.append(builder.bitcast(data, context.get_value_type(wanted)))
            else:
                converted.append(context.cast(builder, value, given, wanted))
        fnty = ir.FunctionType(ir.VoidType(), [context.get_value_type(p) for p in params])
        builder.call(cgutils.get_or_insert_function(builder.module, fnty, symbol), converted)
        return context.get_dummy_value()

    # an intrinsic of the body's own parameters (Numba folds a call by the typer's signature)
    names = ", ".join(body.__code__.co_varnames[:len(params)])
    scope: dict = {"typer": typer}
    exec(f"def call(typingctx, {names}):\n    return typer(typingctx, {names})\n", scope)
    call = intrinsic(scope["call"])
    call.__doc__ = body.__doc__
    return call
