"""Call kiln-compiled kernels from PyTorch, JAX, CuPy and NumPy.

    import kiln
    lib = kiln.load("build/model/libmodel.so")   # any library `kiln compile` produced
    lib.gemv(w, x, y)                              # torch/JAX/CuPy/NumPy tensors, zero-copy
    help(lib.gemv)                                 # its signature

Each function takes DLPack tensors in signature order (inputs, then outputs), validates them
against the kernel's signature (dtype, shape and symbols, strides, alignment, device), and launches
on the current stream of the tensors' framework (torch's current stream for torch tensors), or on
`stream=` when given. Kernels that need device workspace get it per call from the framework's
allocator (torch) or cudaMallocAsync on the launch stream. A wrong argument raises TypeError or
ValueError naming the function, the argument, what was found and what was expected, followed by
the signature.
"""
import os

from ._kiln import ABI_VERSION, Function, open_library
from ._outputs import AllocatingFunction, is_model_library

__all__ = ["load", "Module", "Function", "ABI_VERSION"]


class Module:
    """The functions of one kiln library, as attributes (lib.add) and by name (lib["add"])."""

    def __init__(self, path):
        self.__dict__["_path"] = os.fspath(path)
        functions = {f.__name__: f for f in open_library(self._path)}
        if "main" in functions and is_model_library(self._path):  # kiln compile --model: main(x) returns y
            functions["main"] = AllocatingFunction(functions["main"])
        self.__dict__["_functions"] = functions
        for name, f in functions.items():
            if name.isidentifier() and not name.startswith("_"):
                self.__dict__[name] = f

    @property
    def path(self):
        return self._path

    @property
    def functions(self):
        """Name -> kiln.Function, in the library's order."""
        return dict(self._functions)

    def __getitem__(self, name):
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"{self._path} has no function {name!r}; it has {sorted(self._functions)}") from None

    def __getattr__(self, name):
        raise AttributeError(f"{self._path} has no function {name!r}; it has {sorted(self._functions)}")

    def __setattr__(self, name, value):
        raise AttributeError("kiln.Module is read-only")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._functions))

    def __repr__(self):
        return f"<kiln.Module {self._path}: {', '.join(self._functions)}>"


def load(path):
    """Loads the kiln library at `path` (a .so from `kiln compile`) and returns its functions."""
    return Module(path)
