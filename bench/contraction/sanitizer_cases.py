#!/usr/bin/env python3
"""Writes ONNX backend test folders (model.onnx + test_data_set_0/) that reach every contraction
template configuration kiln's default CUDA schedule can pick, so that `kiln test-onnx --backend cuda`
checks them and compute-sanitizer (memcheck, racecheck) can watch them without PyTorch in the
process (device_run.sh's sanitizer step). numpy only: the expected outputs are float64 products of
the rounded inputs, rounded once to the output dtype; for kiln.QuantLinear cases (`kiln quantize`
writes the model), of the input and the weight decoded as src/ops/QuantLinear.cpp defines it.

Covered: the small-M kernels (M = 1, 2, 16; K off the vector width; N = 12700: the 16-token
SWAP_AB tile), mma.sync tiles with and without split-K (M = 17, 33, 200), the Hopper kernels (M = 300: 128x128 ping-pong; M = 520 with K = 4096
over at least 132 tiles: 128x256 cooperative; M = 416 with K = 8192: the 128 x 208 SWAP_AB tile
with K split over a cluster), dual gate/up products (small M, tiles, Hopper),
Gemm with transB, alpha, beta and C, batched attention products, an attention block, implicit-GEMM
convolutions (stride, dilation, asymmetric pads, 1-D, BN+ReLU) and the plain conv path (groups),
kiln.QuantLinear (NVFP4, INT4) through kernels/quant at M = 1, 5, 17, 200 (N = 192 and 256;
K = 1024: split K in clusters), and row kernels whose block reductions span warps (softmax,
LayerNorm, ReduceSum; `--only rows` writes just those).

Usage: bench/contraction/sanitizer_cases.py OUT_DIR [--kiln PATH] [--small] [--only rows]
  --kiln: also write the QuantLinear cases (needs `kiln quantize`)
  --small: leave out the cases with large operands (the Hopper cooperative tile)
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16
NAMES = {F16: "f16", BF16: "bf16"}


def round_to(a, t):
    """float64 -> the values dtype t can hold (round to nearest even), as float64."""
    a = np.asarray(a, dtype=np.float64)
    if t == F16:
        return a.astype(np.float16).astype(np.float64)
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def tensor(name, a, t):
    """A TensorProto of dtype t holding a (already representable in t)."""
    if t == F16:
        return numpy_helper.from_array(np.asarray(a).astype(np.float16), name)
    bits = (np.asarray(a).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    p = helper.make_tensor(name, BF16, list(np.shape(a)), bits.tobytes(), raw=True)
    return p


def rand(rng, shape, t, scale=1.0):
    return round_to(rng.uniform(-1, 1, size=shape) * scale, t)


def write_case(root, name, nodes, inputs, outputs, inits=(), opset=17, domains=()):
    """inputs/outputs: (name, dtype, array); inits: (name, dtype, array). Writes root/name/."""
    folder = root / name
    (folder / "test_data_set_0").mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, t, list(a.shape)) for n, t, a in inputs],
        [helper.make_tensor_value_info(n, t, list(a.shape)) for n, t, a in outputs],
        [tensor(n, a, t) if t in NAMES else numpy_helper.from_array(a, n) for n, t, a in inits])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(folder / "model.onnx"))
    for kind, items in (("input", inputs), ("output", outputs)):
        for i, (n, t, a) in enumerate(items):
            (folder / "test_data_set_0" / f"{kind}_{i}.pb").write_bytes(tensor(n, a, t).SerializeToString())


def matmul_cases(root, rng, t, small):
    # (M, K, N): the small-M kernel, mma.sync tiles (split-K at M = 200, K = 1024), Hopper tiles.
    # N = 12700 at M <= 16: the 16-token SWAP_AB tile (100 weight tiles, the last one 28 rows); M = 12
    # with N = 200, K = 4096: the same tile (two CTAs an SM) with K split over a cluster.
    shapes = [(1, 136, 200), (2, 72, 200), (16, 520, 72), (12, 4096, 200), (1, 130, 64), (1, 72, 12700), (16, 136, 12700), (17, 200, 40),
              (33, 72, 136), (200, 1024, 136), (300, 264, 200)]
    if not small:
        shapes.append((520, 4096, 6912))  # 5 x 27 = 135 tiles of 128x256 with K >= 4096: the cooperative tile
        shapes.append((416, 8192, 4096))  # 64 SWAP_AB tiles of 128 x 208 with K split in two over a cluster
    for m, k, n in shapes:
        x, w = rand(rng, (m, k), t), rand(rng, (k, n), t, k ** -0.5)
        y = round_to(x @ w, t)
        write_case(root, f"matmul_{NAMES[t]}_m{m}_k{k}_n{n}", [helper.make_node("MatMul", ["x", "w"], ["y"])],
                   [("x", t, x)], [("y", t, y)], [("w", t, w)])
    # 3-D activation, bias and residual into the epilogue (the exporters' Linear + residual).
    for m in (1, 51, 300):
        x, w, b = rand(rng, (1, m, 96), t), rand(rng, (96, 96), t, 96 ** -0.5), rand(rng, (96,), t)
        y = round_to(round_to(round_to(x @ w, t) + b, t) + x, t)
        nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["lin"]),
                 helper.make_node("Add", ["lin", "x"], ["y"])]
        write_case(root, f"linear_residual_{NAMES[t]}_m{m}", nodes, [("x", t, x)], [("y", t, y)], [("w", t, w), ("b", t, b)])


def gemm_cases(root, rng, t):
    for m in (1, 40, 300):
        a, bt, c = rand(rng, (m, 80), t), rand(rng, (136, 80), t, 80 ** -0.5), rand(rng, (136,), t)
        y = round_to(0.5 * (a @ bt.T) + 2.0 * c, t)
        node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)
        write_case(root, f"gemm_transb_{NAMES[t]}_m{m}", [node], [("a", t, a)], [("y", t, y)], [("b", t, bt), ("c", t, c)])


def gelu(v):
    return 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))


def mlp_cases(root, rng, t):
    """gelu_tanh(x Wg) * (x Wu), then Wd, plus the residual: the dual product and the down product
    (F = 12700 at M <= 16: the dual product on the 16-token SWAP_AB tile)."""
    h = 96
    for f, m in [(264, m) for m in (1, 16, 17, 200, 300)] + [(12700, 1), (12700, 16)]:
        x = rand(rng, (m, h), t)
        wg, wu, wd = rand(rng, (h, f), t, h ** -0.5), rand(rng, (h, f), t, h ** -0.5), rand(rng, (f, h), t, f ** -0.5)
        g, u = round_to(x @ wg, t), round_to(x @ wu, t)
        p = round_to(gelu(g) * u, t)
        y = round_to(round_to(p @ wd, t) + x, t)
        c = lambda v: ("c" + str(v), t, np.array(v))  # noqa: E731
        nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"]), helper.make_node("MatMul", ["x", "wu"], ["u"]),
                 helper.make_node("Mul", ["g", "g"], ["g2"]), helper.make_node("Mul", ["g2", "g"], ["g3"]),
                 helper.make_node("Mul", ["g3", "c0.044715"], ["g3s"]), helper.make_node("Add", ["g", "g3s"], ["inner"]),
                 helper.make_node("Mul", ["inner", "c0.7978845608028654"], ["z"]), helper.make_node("Tanh", ["z"], ["th"]),
                 helper.make_node("Add", ["th", "c1.0"], ["th1"]), helper.make_node("Mul", ["g", "th1"], ["gt"]),
                 helper.make_node("Mul", ["gt", "c0.5"], ["act"]), helper.make_node("Mul", ["act", "u"], ["p"]),
                 helper.make_node("MatMul", ["p", "wd"], ["d"]), helper.make_node("Add", ["d", "x"], ["y"])]
        consts = [(n, t, round_to(np.array(float(n[1:])), t)) for n in ("c0.044715", "c0.7978845608028654", "c1.0", "c0.5")]
        write_case(root, f"mlp_gelu_{NAMES[t]}_m{m}" + ("" if f == 264 else f"_f{f}"), nodes, [("x", t, x)], [("y", t, y)],
                   [("wg", t, wg), ("wu", t, wu), ("wd", t, wd)] + consts)


def softmax(v):
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_cases(root, rng, t):
    """Batched products (Q K^T, P V) and a whole attention core: softmax(Q K^T / sqrt(d)) V, moved to [b, s, h*d]."""
    for s, d in ((40, 64), (197, 64), (33, 40)):
        q, k, v = (rand(rng, (2, 3, s, d), t) for _ in range(3))
        scores = round_to(round_to(q @ k.transpose(0, 1, 3, 2), t) * round_to(np.array(d ** -0.5), t), t)
        p = round_to(softmax(scores), t)
        o = round_to(p @ v, t).transpose(0, 2, 1, 3).reshape(2, s, 3 * d)
        nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("MatMul", ["q", "kt"], ["s0"]), helper.make_node("Mul", ["s0", "scale"], ["s1"]),
                 helper.make_node("Softmax", ["s1"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["c"]),
                 helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]),
                 helper.make_node("Reshape", ["ct", "shape"], ["y"])]
        write_case(root, f"attention_{NAMES[t]}_s{s}_d{d}", nodes, [("q", t, q), ("k", t, k), ("v", t, v)], [("y", t, o)],
                   [("scale", t, round_to(np.array(d ** -0.5), t)), ("shape", None, np.array([2, -1, 3 * d], np.int64))])


def layer_norm(x, g, b, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def row_cases(root, rng, t):
    """Row kernels whose block reductions span warps (kiln::block_allreduce's shared slots, which
    the conformance suites' small rows never reach): softmax over 4096 (8 warps: the in-order sum
    of the partials) and 32000 (32 warps: the second butterfly), LayerNorm over 4096 (two
    reductions a row), and 8200 rows of 512 (LayerNorm, ReduceSum): more rows than the grid's
    8192 blocks, so some blocks reduce two rows and reuse their slots."""
    for rows, cols in ((6, 4096), (3, 32000)):
        x = rand(rng, (rows, cols), t, 4.0)
        write_case(root, f"rows_softmax_{NAMES[t]}_{rows}x{cols}", [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                   [("x", t, x)], [("y", t, round_to(softmax(x), t))])
    for rows, cols in ((6, 4096), (8200, 512)):
        x = round_to(rand(rng, (rows, cols), t, 2.0) + rng.integers(-3, 4, size=(rows, 1)), t)
        g, b = rand(rng, (cols,), t, 1.5), rand(rng, (cols,), t, 0.5)
        write_case(root, f"rows_layernorm_{NAMES[t]}_{rows}x{cols}",
                   [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
                   [("x", t, x), ("g", t, g), ("b", t, b)], [("y", t, round_to(layer_norm(x, g, b), t))])
    x = rand(rng, (8200, 512), t, 0.5)
    write_case(root, f"rows_reducesum_{NAMES[t]}_8200x512", [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
               [("x", t, x)], [("y", t, round_to(x.sum(axis=-1, keepdims=True), t))], [("axes", None, np.array([-1], np.int64))])


def conv_reference(x, w, b, strides, pads, dil, group):
    nd = len(strides)
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    n, c = x.shape[:2]
    oc, icg = w.shape[:2]
    out_sz = [(x.shape[2 + i] - dil[i] * (w.shape[2 + i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    y = np.zeros([n, oc] + out_sz)
    ocg = oc // group
    for g in range(group):
        xs = x[:, g * icg:(g + 1) * icg]
        for tap in np.ndindex(*w.shape[2:]):
            idx = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + strides[i] * (out_sz[i] - 1) + 1, strides[i]) for i in range(nd))
            patch = xs[(slice(None), slice(None)) + idx]  # [n, icg, *out]
            wt = w[g * ocg:(g + 1) * ocg, :, *tap]  # [ocg, icg]
            y[:, g * ocg:(g + 1) * ocg] += np.einsum("nc...,oc->no...", patch, wt)
    return y + b.reshape([1, oc] + [1] * nd)


CONV_CASES = [  # (x [n, c, *spatial], w, strides, pads, dilations, group)
    ([2, 3, 13, 11], [24, 3, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
    ([2, 16, 19, 23], [40, 16, 3, 3], [2, 2], [1, 0, 2, 1], [1, 1], 1),
    ([1, 32, 15, 17], [72, 32, 3, 3], [1, 1], [2, 2, 2, 2], [2, 2], 1),
    ([3, 24, 9, 9], [136, 24, 1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1),
    ([2, 64, 28, 28], [128, 64, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
    ([2, 40, 37], [48, 40, 5], [2], [2, 1], [1], 1),
    ([2, 16, 12, 12], [32, 8, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 2),
]


def conv_cases(root, rng, t):
    for i, (xs, ws, strides, pads, dil, group) in enumerate(CONV_CASES):
        fan_in = int(np.prod(ws[1:]))
        x, w, b = rand(rng, xs, t), rand(rng, ws, t, fan_in ** -0.5), rand(rng, (ws[0],), t)
        # BatchNorm (inference) + ReLU after the conv, as a CNN exports them.
        # Each parameter rounded to t as the model will hold it: the expectation must use the same values.
        scale, shift = round_to(rand(rng, (ws[0],), t) + 1.5, t), rand(rng, (ws[0],), t)
        mean, var = round_to(rand(rng, (ws[0],), t) * 0.1, t), round_to(rng.uniform(0.5, 1.5, ws[0]), t)
        bc = [1, ws[0]] + [1] * (len(xs) - 2)
        c = round_to(conv_reference(x, w, b, strides, pads, dil, group), t)
        bn = round_to((c - mean.reshape(bc)) / np.sqrt(var.reshape(bc) + 1e-5) * scale.reshape(bc) + shift.reshape(bc), t)
        y = np.maximum(bn, 0)
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=strides, pads=pads, dilations=dil, group=group),
                 helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["bn"], epsilon=1e-5),
                 helper.make_node("Relu", ["bn"], ["y"])]
        write_case(root, f"conv_{NAMES[t]}_{i}", nodes, [("x", t, x)], [("y", t, y)],
                   [("w", t, w), ("b", t, b), ("scale", t, scale), ("shift", t, shift), ("mean", t, mean), ("var", t, var)])


QUANT = [("nvfp4", ["--format", "nvfp4"]), ("int4", ["--format", "int4", "--group", "64"])]


def decode_e2m1(code):
    """E2M1 codes (uint8, 4 bits) -> float64: magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}, bit 3 the sign."""
    mag = (code & 7).astype(np.float64)
    normal = ((code & 1) + 2) * np.exp2((code & 7) >> 1) * 0.25
    value = np.where((code & 7) < 2, mag * 0.5, normal)
    return np.where(code & 8, -value, value)


def decode_e4m3(bits):
    """E4M3 (fn) bits (uint8) -> float64: bias 7, subnormals m/8 * 2^-6, 0x7f / 0xff NaN."""
    exp, mant = (bits >> 3) & 15, (bits & 7).astype(np.float64)
    value = np.where(exp == 0, mant / 512.0, (1 + mant / 8) * np.exp2(exp.astype(np.float64) - 7))
    value = np.where((bits & 127) == 127, np.nan, value)
    return np.where(bits & 128, -value, value)


def dequantize(model):
    """The weight [N, K] in float64 that the model's single kiln.QuantLinear node holds, decoded as
    src/ops/QuantLinear.cpp defines it (low nibble first)."""
    node = next(n for n in model.graph.node if n.op_type == "QuantLinear")
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    fmt, block = attrs["format"].decode(), attrs["block_size"]
    w, scales = inits[node.input[1]], inits[node.input[2]]
    codes = np.stack([w & 15, w >> 4], axis=-1).reshape(w.shape[0], -1)
    expand = lambda a: np.repeat(a.astype(np.float64), block, axis=1)  # noqa: E731  [N, K/block] -> [N, K]
    if fmt == "nvfp4":
        return decode_e2m1(codes) * expand(decode_e4m3(scales.view(np.uint8))) * float(inits[node.input[3]].reshape(-1)[0])
    if fmt == "int4":
        return (codes.astype(np.float64) - expand(inits[node.input[3]])) * expand(scales)
    raise ValueError(f"format {fmt} has no decoder here")


# (M, N, K). N = 192: the GEMV and the mma.sync GEMM; N = 256 (a multiple of 128) reaches the sm_90a
# wgmma GEMM at M >= 17; with K = 1024 (4 stages of 256 over 2 or 4 tiles) it splits K in clusters
# of 2 (variant 4's cluster reduction through distributed shared memory).
QUANT_SHAPES = ((1, 192, 256), (5, 192, 256), (17, 192, 256), (200, 192, 256), (17, 256, 256), (200, 256, 256),
                (17, 256, 1024), (200, 256, 1024))


def quant_cases(root, rng, kiln, t, shapes=QUANT_SHAPES):
    """kiln quantize of a Linear; the expected output is the float64 product of the input and the
    decoded 4-bit weight, rounded once (numpy: kiln's CPU interpreter takes about 100 s a case at
    M = 200, K = 1024). tests/python/test_sanitizer_cases.py checks this decoder against that
    interpreter on the small shapes."""
    for fmt, args in QUANT:
        for m, n, k in shapes:
            name = f"quantlinear_{fmt}_{NAMES[t]}_m{m}_n{n}" + (f"_k{k}" if k != 256 else "")
            with tempfile.TemporaryDirectory() as tmp:
                tmp = pathlib.Path(tmp)
                x = rand(rng, (m, k), t)
                write_case(tmp, "float", [helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", t, x)],
                           [("y", t, np.zeros((m, n)))], [("w", t, rand(rng, (k, n), t, k ** -0.5))])
                quantized = tmp / "q.onnx"
                subprocess.run([kiln, "quantize", str(tmp / "float" / "model.onnx"), "-o", str(quantized)] + args,
                               check=True, stdout=subprocess.DEVNULL)
                model = onnx.load(str(quantized))
                folder = root / name
                (folder / "test_data_set_0").mkdir(parents=True, exist_ok=True)
                shutil.copy(quantized, folder / "model.onnx")
                y = round_to(x @ dequantize(model).T, t)
                for kind, (tname, a) in (("input", (model.graph.input[0].name, x)), ("output", (model.graph.output[0].name, y))):
                    (folder / "test_data_set_0" / f"{kind}_0.pb").write_bytes(tensor(tname, a, t).SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--kiln", help="kiln binary: also write the kiln.QuantLinear cases")
    ap.add_argument("--small", action="store_true", help="leave out the large Hopper cooperative-tile case")
    ap.add_argument("--only", choices=["rows"], help="write only this set (rows: the multi-warp row reductions)")
    args = ap.parse_args()
    root = pathlib.Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261123)
    for t in (F16, BF16):
        if args.only == "rows":
            row_cases(root, rng, t)
            continue
        matmul_cases(root, rng, t, args.small)
        gemm_cases(root, rng, t)
        mlp_cases(root, rng, t)
        attention_cases(root, rng, t)
        conv_cases(root, rng, t)
        row_cases(root, rng, t)
        if args.kiln:
            quant_cases(root, rng, args.kiln, t)
    print(f"wrote {sum(1 for _ in root.glob('*/model.onnx'))} cases to {root}")


if __name__ == "__main__":
    sys.exit(main())
