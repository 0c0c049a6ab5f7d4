"""popxl-addons' C++ custom ops, served in Python.

popxl-addons compiles its custom ops at import time: `import cppimport.import_hook` then
`from . import <name>_binding`, a pybind11 module built from `<name>_binding.cpp`. Here an import
hook (installed when popxl is imported) serves each of those binding modules with classes whose
`createOpInGraph` records an op written on the custom-op API (popxl/custom_op.py; the ops are in
this package, each with the semantics of its C++ source). Nothing is compiled:

- when cppimport is not installed, `cppimport` and `cppimport.import_hook` are stand-ins here;
- when it is installed, the real one loads (never shadowed), and this hook is moved back in
  front of its finder, so the binding modules are still served from here.

A binding module is served only where its `.cpp` source sits beside the importing package (what
cppimport would have compiled), so unrelated modules of the same name are left alone.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["BINDINGS", "install", "BindingFinder"]

# binding module name -> the module of this package that implements its classes
BINDINGS = {
    "replicated_all_gather_strided_binding": "popxl._addons.strided_collectives",
    "replicated_all_reduce_strided_binding": "popxl._addons.strided_collectives",
    "replicated_reduce_scatter_strided_binding": "popxl._addons.strided_collectives",
    "replicated_all_reduce_TP_binding": "popxl._addons.all_reduce_tp",
    "grad_reduce_square_add_binding": "popxl._addons.grad_reduce_square_add",
    "rotary_pos_embed_binding": "popxl._addons.rotary_pos_embed",
    "layer_norm_distributed_binding": "popxl._addons.layer_norm_distributed",
    "crossentropysharded_binding": "popxl._addons.cross_entropy_sharded",
    "crossentropysharded_wr_binding": "popxl._addons.cross_entropy_sharded_wr",
}


class _BindingLoader(importlib.abc.Loader):
    def __init__(self, impl: str, source: str):
        self.impl = impl
        self.source = source

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__.rsplit(".", 1)[-1]
        for cls in _binding_classes(name, self.source):
            setattr(module, cls.__name__, cls)
        module.__doc__ = (f"{name}: the simulator's Python implementation of {os.path.basename(self.source)} "
                          f"({self.impl}); nothing is compiled.")
        module.__served_by__ = self.impl


def _implementations():
    from . import (all_reduce_tp, cross_entropy_sharded, cross_entropy_sharded_wr, grad_reduce_square_add,
                   layer_norm_distributed, rotary_pos_embed, strided_collectives)
    return (strided_collectives, all_reduce_tp, grad_reduce_square_add, rotary_pos_embed, layer_norm_distributed,
            cross_entropy_sharded, cross_entropy_sharded_wr)


def _binding_classes(name: str, source: str) -> list:
    """The classes of binding module `name` compiled from `source`. Where several implementations
    share the module name, the one whose functions the source defines (popxl/_addons/_sources.py);
    when the source is none of them, classes whose `createOpInGraph` raises, naming the source."""
    from ._sources import sources, unservable

    for m in _implementations():
        variants = getattr(m, "VARIANTS", {}).get(name)
        if variants:
            src = sources(source)
            for v in variants:
                if v.matches(src):
                    return v.classes
            return [_refusing_class(cls.__name__, unservable(name, src, variants)) for cls in variants[0].classes]
        if name in getattr(m, "BINDING_CLASSES", {}):
            return m.BINDING_CLASSES[name]
    raise ImportError(f"no Python implementation of binding module {name!r}")


def _refusing_class(class_name: str, why: str):
    def create(*args, **kwargs):
        raise NotImplementedError(why)
    return type(class_name, (), {"createOpInGraph": staticmethod(create), "__doc__": why})


class _CppimportStandIn(importlib.abc.Loader):
    """`cppimport` when it is not installed: enough for `import cppimport.import_hook`."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__doc__ = ("Stand-in for cppimport (not installed): the simulator serves popxl-addons' C++ binding "
                          "modules in Python (popxl/_addons), so nothing needs compiling.")
        if module.__name__ == "cppimport":
            module.__path__ = []

            def imp(fullname, opt_in=False):
                raise ImportError(f"cppimport.imp({fullname!r}): cppimport is not installed; the simulator serves "
                                  f"only popxl-addons' binding modules ({', '.join(sorted(BINDINGS))})")

            module.imp = imp
            module.__version__ = "0+ipu-sim-stand-in"


class _RealThenFront(importlib.abc.Loader):
    """Load the real `cppimport.import_hook`, then put the binding finder back in front of the
    finder it installs (so binding modules are still served here, never compiled)."""

    def __init__(self, loader, finder: "BindingFinder"):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _to_front(self.finder)


def _real_spec(fullname: str, path=None):
    """The spec another finder on sys.meta_path gives `fullname` (the installed package)."""
    for finder in sys.meta_path:
        if isinstance(finder, BindingFinder) or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec(fullname, path)
        except (ImportError, AttributeError, ValueError):
            continue
        if spec is not None:
            return spec
    return None


class _UnservedLoader(importlib.abc.Loader):
    """A cppimport module the simulator has no implementation of: it imports (so a package that
    imports all its ops still loads), and using any of its names raises, naming the source."""

    def __init__(self, source: str):
        self.source = source

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        leaf = module.__name__.rsplit(".", 1)[-1]
        why = (f"{leaf}: the C++ custom op cppimport would compile from {self.source} has no Python implementation "
               f"in the simulator, which compiles no C++ (it serves popxl-addons' {', '.join(sorted(BINDINGS))}). "
               f"Write the op in Python with popxl.custom_op (docs/custom-ops.md).")

        def __getattr__(attr):  # noqa: N807
            if attr.startswith("__"):
                raise AttributeError(attr)
            raise NotImplementedError(f"{leaf}.{attr}: {why}")

        module.__getattr__ = __getattr__
        module.__doc__ = why


def _cppimport_source(folder: str, leaf: str):
    """`folder/leaf.cpp` when it is the cppimport source of a PopART custom op (its first lines say
    `cppimport` and it includes PopART's headers). Other C++ modules (a pybind11 helper that needs
    no IPU) are left to the real cppimport."""
    source = os.path.join(folder, leaf + ".cpp")
    if not os.path.exists(source):
        return None
    try:
        with open(source, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return None
    return source if "cppimport" in text[:512] and "popart" in text else None


class BindingFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        leaf = fullname.rsplit(".", 1)[-1]
        if leaf in BINDINGS and "." in fullname:
            for d in path or ():
                source = os.path.join(d, leaf + ".cpp")
                if os.path.exists(source):
                    return importlib.machinery.ModuleSpec(fullname, _BindingLoader(BINDINGS[leaf], source),
                                                          origin=source)
            return None
        if "." in fullname and not fullname.startswith("cppimport"):
            for d in path or ():
                source = _cppimport_source(d, leaf)
                if source is not None and not os.path.exists(os.path.join(d, leaf + ".py")):
                    return importlib.machinery.ModuleSpec(fullname, _UnservedLoader(source), origin=source)
        if fullname == "cppimport" or fullname.startswith("cppimport."):
            if fullname == "cppimport":
                real = _real_spec("cppimport")
                if real is not None:
                    return None  # the installed cppimport: never shadowed
                return importlib.machinery.ModuleSpec("cppimport", _CppimportStandIn(), is_package=True)
            parent = sys.modules.get("cppimport")
            if parent is not None and str(getattr(parent, "__version__", "")).endswith("ipu-sim-stand-in"):
                return importlib.machinery.ModuleSpec(fullname, _CppimportStandIn())
            if fullname == "cppimport.import_hook":
                real = _real_spec(fullname, getattr(parent, "__path__", None))
                if real is not None:  # the real module (file, cache...), loaded then followed by our re-fronting
                    real.loader = _RealThenFront(real.loader, self)
                    return real
        return None


_FINDER = BindingFinder()


def _to_front(finder) -> None:
    while finder in sys.meta_path:
        sys.meta_path.remove(finder)
    sys.meta_path.insert(0, finder)


def install() -> None:
    """Put the binding finder first on sys.meta_path (idempotent)."""
    _to_front(_FINDER)
