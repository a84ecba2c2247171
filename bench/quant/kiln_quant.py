"""Python side of the quant benchmark: a torch mirror of kiln's quantizer (src/quant/Quantize.cpp,
same rules), the kernel nibble order and gate/up interleave (include/kiln/quant/Prepack.h), and
a ctypes caller of libkiln_quant through the kernel contract (include/kiln/runtime/kiln_abi.h)."""
import ctypes as C

import torch

E2M1_VALUES = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
E2M1_BOUNDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
TIE_UP = torch.tensor([0.75, 1.75, 3.5])  # midpoints whose even neighbour is the upper one


def e2m1_codes(v):
    """Round-to-nearest-even E2M1 codes (uint8) of fp32 v, saturating at +-6."""
    mag = v.abs()
    b = E2M1_BOUNDS.to(v.device)
    idx = torch.bucketize(mag, b, right=False)  # ties go to the lower code
    idx = idx + (mag.unsqueeze(-1) == TIE_UP.to(v.device)).any(-1).long()
    return (idx.clamp(max=7) | (torch.signbit(v).long() << 3)).to(torch.uint8)


def e2m1_values(codes):
    return E2M1_VALUES.to(codes.device)[codes.long()]


class Quantized:
    """One weight [n, k]: codes (uint8, one per element) + scales (+ zeros, tensor scale)."""

    def __init__(self, fmt, codes, scales, zeros=None, s2=None, group=16):
        self.fmt, self.codes, self.scales, self.zeros, self.s2, self.group = fmt, codes, scales, zeros, s2, group

    def dequant(self):
        n, k = self.codes.shape
        g = self.group
        if self.fmt == "nvfp4":
            v = e2m1_values(self.codes).view(n, k // g, g) * self.scales.float().unsqueeze(-1) * self.s2
        elif self.fmt == "mxfp4":
            x = torch.exp2(self.scales.float() - 127.0)
            v = e2m1_values(self.codes).view(n, k // g, g) * x.unsqueeze(-1)
        else:
            v = (self.codes.float().view(n, k // g, g) - self.zeros.float().unsqueeze(-1)) * self.scales.float().unsqueeze(-1)
        return v.view(n, k)

    def scale_tensor(self):
        """Scales as the kernels take them: raw E4M3/E8M0 bytes or bf16."""
        if self.fmt == "nvfp4":
            return self.scales.view(torch.uint8)
        return self.scales


def quantize(w, fmt, group=128, scale_dtype=torch.bfloat16):
    """w fp32 [n, k] on the GPU."""
    n, k = w.shape
    if fmt == "nvfp4":
        amax = w.abs().max()
        s2 = torch.where(amax == 0, torch.ones_like(amax), amax / (6.0 * 448.0))
        blocks = w.view(n, k // 16, 16)
        bmax = blocks.abs().amax(-1)
        raw = torch.where(bmax == 0, torch.ones_like(bmax), bmax / (6.0 * s2)).clamp(max=448.0)
        sc = raw.to(torch.float8_e4m3fn)
        div = (sc.float() * s2).unsqueeze(-1)
        codes = torch.where(div == 0, torch.zeros_like(blocks), blocks / div)
        return Quantized(fmt, e2m1_codes(codes).view(n, k), sc, s2=s2.float(), group=16)
    if fmt == "mxfp4":
        blocks = w.view(n, k // 32, 32)
        bmax = blocks.abs().amax(-1)
        _, e = torch.frexp(bmax)
        exp = torch.where(bmax == 0, torch.full_like(e, -127), e - 1 - 2).clamp(-127, 127)
        x = torch.exp2(exp.float()).unsqueeze(-1)
        return Quantized(fmt, e2m1_codes(blocks / x).view(n, k), (exp + 127).to(torch.uint8), group=32)
    blocks = w.view(n, k // group, group)
    lo = blocks.amin(-1).clamp(max=0)
    hi = blocks.amax(-1).clamp(min=0)
    s = torch.where(hi > lo, (hi - lo) / 15.0, torch.ones_like(hi)).to(scale_dtype)
    sf = s.float()
    z = torch.round(-lo / sf).clamp(0, 15)
    q = torch.round(blocks / sf.unsqueeze(-1) + z.unsqueeze(-1)).clamp(0, 15).to(torch.uint8)
    return Quantized("int4", q.view(n, k), s, zeros=z.to(scale_dtype), group=group)


def kernel_bytes(codes):
    """Codes [n, k] -> data [n, k/2] in kernel nibble order (Prepack.h): per 8 elements the
    bytes are (e0|e2<<4, e4|e6<<4, e1|e3<<4, e5|e7<<4)."""
    n, k = codes.shape
    c = codes.view(n, k // 8, 8).to(torch.uint8)
    out = torch.stack([c[..., 0] | (c[..., 2] << 4), c[..., 4] | (c[..., 6] << 4),
                       c[..., 1] | (c[..., 3] << 4), c[..., 5] | (c[..., 7] << 4)], -1)
    return out.view(n, k // 2).contiguous()


def interleave_rows(a, b):
    """Rows of a and b alternating in groups of 8 (Prepack.h, gate/up interleave)."""
    n = a.shape[0]
    return torch.stack([a.reshape(n // 8, 8, -1), b.reshape(n // 8, 8, -1)], 1).reshape(2 * n, *a.shape[1:]).contiguous()


class KernelWeight:
    """The argument tensors of one weight operand, in signature order."""

    def __init__(self, q, q2=None):
        if q2 is None:
            self.data = kernel_bytes(q.codes)
            self.scale = q.scale_tensor().contiguous()
            self.zero = q.zeros.contiguous() if q.zeros is not None else None
            self.s2 = q.s2.reshape(1).contiguous() if q.s2 is not None else None
        else:  # fused gate/up
            self.data = kernel_bytes(interleave_rows(q.codes, q2.codes))
            self.scale = interleave_rows(q.scale_tensor(), q2.scale_tensor())
            self.zero = interleave_rows(q.zeros, q2.zeros) if q.zeros is not None else None
            self.s2 = torch.stack([q.s2, q2.s2]).float().contiguous() if q.s2 is not None else None
        self.fmt = q.fmt

    def args(self):
        out = [self.data, self.scale]
        if self.zero is not None:
            out.append(self.zero)
        if self.s2 is not None:
            out.append(self.s2)
        return out

    def nbytes(self):
        return sum(t.numel() * t.element_size() for t in self.args())


# ---- ctypes: DLPack + the kernel contract ----
class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


_DT = {torch.uint8: (1, 8), torch.float32: (2, 32), torch.float16: (2, 16), torch.bfloat16: (4, 16),
       torch.float8_e4m3fn: (1, 8)}


class Call:
    """A prepared call of kiln_<name>(tensors..., workspace, stream); keeps its ctypes alive."""

    def __init__(self, lib, name, tensors, workspace=None, byte_offsets=None):
        self.fn = getattr(lib, "kiln_" + name)
        self.fn.restype = C.c_int32
        self.fn.argtypes = [C.POINTER(DLTensor), C.c_int32, C.c_void_p, C.c_void_p]
        self.lib = lib
        self.tensors = tensors
        self.arr = (DLTensor * len(tensors))()
        self.shapes = []
        for i, t in enumerate(tensors):
            shape = (C.c_int64 * t.dim())(*t.shape)
            self.shapes.append(shape)
            code, bits = _DT[t.dtype]
            off = byte_offsets[i] if byte_offsets else 0
            self.arr[i] = DLTensor(C.c_void_p(t.data_ptr() - off), DLDevice(2, t.device.index or 0), t.dim(),
                                   DLDataType(code, bits, 1), shape, None, off)
        self.ws = C.c_void_p(workspace.data_ptr() if workspace is not None else None)

    def __call__(self):
        st = self.fn(self.arr, len(self.tensors), self.ws, C.c_void_p(torch.cuda.current_stream().cuda_stream))
        if st != 0:
            raise RuntimeError(f"status {st}: {last_error(self.lib)}")

    def status(self):
        return self.fn(self.arr, len(self.tensors), self.ws, C.c_void_p(torch.cuda.current_stream().cuda_stream))


def last_error(lib):
    lib.kiln_last_error.restype = C.c_char_p
    return lib.kiln_last_error().decode()
