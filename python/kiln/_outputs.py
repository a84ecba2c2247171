"""Outputs allocated for the caller, for model libraries (`kiln compile --model`): `lib.main(x)`
allocates `main`'s outputs with the first input's framework (torch: same device; NumPy; CuPy),
shapes from the signature with the symbols bound by the inputs, calls, and returns them (one
tensor, or a tuple). Passing the outputs (`lib.main(x, y)`) works as for any kiln function."""
import ctypes
import json

_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
           "int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64", "bool": "bool"}


def is_model_library(path):
    try:
        return hasattr(ctypes.CDLL(path), "kiln_model_info")
    except OSError:
        return False


def _allocate(like, shape, dtype):
    module = type(like).__module__.split(".")[0]
    if module == "torch":
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    if module in ("numpy", "cupy"):
        xp = __import__(module)
        if dtype == "bfloat16":
            raise TypeError("NumPy/CuPy have no bfloat16: pass the outputs")
        return xp.empty(shape, dtype=_DTYPES[dtype])
    raise TypeError(f"cannot allocate outputs for {type(like).__name__} inputs: pass the outputs")


class AllocatingFunction:
    """A model library's entry point: called with the inputs only, it allocates and returns the
    outputs; every other call (and attribute) is the kiln.Function's."""

    def __init__(self, function):
        self._function = function
        sig = json.loads(function.signature_json)
        self._inputs = [p for p in sig["params"] if not p["is_output"]]
        self._outputs = [p for p in sig["params"] if p["is_output"]]

    def __call__(self, *args, **kwargs):
        if len(args) != len(self._inputs) or not self._outputs or not args:
            return self._function(*args, **kwargs)
        symbols = {}
        for param, arg in zip(self._inputs, args):
            for dim, size in zip(param["shape"], tuple(getattr(arg, "shape", ()))):
                if isinstance(dim, str):
                    symbols.setdefault(dim, int(size))
        outputs = []
        for param in self._outputs:
            shape = []
            for dim in param["shape"]:
                if isinstance(dim, str) and dim not in symbols:
                    raise ValueError(f"{self._function.signature}: output {param['name']} has a dim '{dim}' that no "
                                     f"input binds; pass the outputs")
                shape.append(symbols[dim] if isinstance(dim, str) else int(dim))
            outputs.append(_allocate(args[0], tuple(shape), param["dtype"]))
        self._function(*args, *outputs, **kwargs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __getattr__(self, name):
        return getattr(self._function, name)

    @property
    def __doc__(self):
        return self._function.__doc__

    def __repr__(self):
        return repr(self._function)
