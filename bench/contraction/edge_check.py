#!/usr/bin/env python3
"""Edge shapes of the contraction templates, end to end through `kiln compile` (run on the GPU,
also under compute-sanitizer memcheck/racecheck by device_run.sh): a gated MLP and attention's
batched products with sizes that are not multiples of any tile (K = 72 and 200, N = 200 and 40,
odd sequence lengths; a gated MLP 72 -> 12700 for the 16-token SWAP_AB tile), float16 and
bfloat16, at M = 1, 2, 16, 17, 33 and 300 (the small-M kernels and the tensor-core kernel on both
sides of each switch); convolutions through the implicit-GEMM template
(strides, asymmetric padding, dilation, 1x1, 5x5, C = 3, channels and pixels off every tile, 1-D,
a symbolic batch at two sizes) and ones that keep the plain path (groups, depthwise). Each result is
checked against an fp32 torch reference on fresh random data with NaN-poisoned outputs. Exit status
1 on any failure.

Usage: bench/contraction/edge_check.py --kiln PATH [--work DIR] [--kinds mlp,mlpwide,attention,attention64,conv] [--bf16-cases 1,5,13]
"""
import argparse
import importlib.util
import os
import subprocess
import sys

import onnx
import torch
from onnx import TensorProto, helper

_spec = importlib.util.spec_from_file_location("kiln_contraction_bench",
                                               os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench.py"))
_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench)
KilnModel, rel_err = _bench.KilnModel, _bench.rel_err

ONNX_TYPE = {torch.float16: TensorProto.FLOAT16, torch.bfloat16: TensorProto.BFLOAT16}
# The wide MLP's hidden size (kind mlpwide).
WIDE_F = 12700
# Added to every kiln compile: $KILN_COMPILE_FLAGS, space-separated (e.g. --conv-wgmma).
COMPILE_FLAGS = os.environ.get("KILN_COMPILE_FLAGS", "").split()


def mlp_model(path, t, h=72, f=200):
    x = helper.make_tensor_value_info("x", t, ["m", h])
    ins = [x] + [helper.make_tensor_value_info(n, t, s) for n, s in (("wg", [h, f]), ("wu", [h, f]), ("wd", [f, h]))]
    nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"], name="gate"),
             helper.make_node("MatMul", ["x", "wu"], ["u"], name="up"),
             helper.make_node("Tanh", ["g"], ["a"], name="act"), helper.make_node("Mul", ["a", "u"], ["p"], name="prod"),
             helper.make_node("MatMul", ["p", "wd"], ["d"], name="down"),
             helper.make_node("Add", ["d", "x"], ["y"], name="residual")]
    g = helper.make_graph(nodes, "edge_mlp", ins, [helper.make_tensor_value_info("y", t, ["m", h])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def attention_model(path, t, heads=3, d=40, scaled=False):
    """softmax(q k^T) v, then (.transpose(1, 2).reshape(b, s, heads * d)) @ w_proj, as a ViT exports it.
    `scaled`: softmax(q k^T * scale + mask) with a scale initializer and a [2, 1, s, s] additive mask."""
    q = helper.make_tensor_value_info("q", t, [2, heads, "s", d])
    k = helper.make_tensor_value_info("k", t, [2, heads, "s", d])
    v = helper.make_tensor_value_info("v", t, [2, heads, "s", d])
    w = helper.make_tensor_value_info("w_proj", t, [heads * d, 24])
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [2, -1, heads * d])
    inits = [shape]
    logits = "s0"
    extra, ins = [], []
    if scaled:
        inits.append(helper.make_tensor("scale", t, [], [0.125]))
        extra = [helper.make_node("Mul", ["s0", "scale"], ["s1"], name="scale"),
                 helper.make_node("Add", ["s1", "mask"], ["s2"], name="mask")]
        ins = [helper.make_tensor_value_info("mask", t, [2, 1, "s", "s"])]
        logits = "s2"
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
             helper.make_node("MatMul", ["q", "kt"], ["s0"], name="scores")] + extra + [
             helper.make_node("Softmax", [logits], ["p"], axis=-1, name="softmax"),
             helper.make_node("MatMul", ["p", "v"], ["c"], name="context"),
             helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3], name="moved"),
             helper.make_node("Reshape", ["ct", "shape"], ["m"], name="merged"),
             helper.make_node("MatMul", ["m", "w_proj"], ["y"], name="proj")]
    g = helper.make_graph(nodes, "edge_attention", [q, k, v, w] + ins,
                          [helper.make_tensor_value_info("y", t, [2, "s", 24])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


# (x shape with batch "n", weight shape, strides, pads, dilations, group): edge convolutions.
CONV_CASES = [
    ([3, 13, 11], [24, 3, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),      # C = 3 (unaligned weight rows)
    ([16, 19, 23], [40, 16, 3, 3], [2, 2], [1, 0, 2, 1], [1, 1], 1),    # stride 2, asymmetric pads
    ([32, 15, 17], [72, 32, 3, 3], [1, 1], [2, 2, 2, 2], [2, 2], 1),    # dilation 2
    ([24, 9, 9], [136, 24, 1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1),     # 1x1, M past one 128 tile
    ([8, 20, 20], [8, 8, 5, 5], [1, 3], [2, 2, 2, 2], [1, 1], 1),       # 5x5, mixed strides
    ([64, 7, 7], [64, 64, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),      # K = 576, few pixels
    ([40, 37], [48, 40, 5], [2], [2, 1], [1], 1),                       # 1-D
    # conv_direct.cuh (C * KH * KW <= 32; case 0 above too): mixed strides and dilations, asymmetric
    # pads, M off its 8-channel passes; one channel 5x5; 1-D; then C = 3 with 7x7 (K = 147: the gather kernel)
    ([3, 21, 18], [20, 3, 3, 3], [2, 1], [0, 1, 2, 0], [1, 2], 1),
    ([1, 30, 30], [5, 1, 5, 5], [1, 1], [2, 2, 2, 2], [1, 1], 1),
    ([2, 50], [16, 2, 9], [2], [4, 3], [1], 1),
    ([3, 16, 16], [16, 3, 7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1),
    # conv_patch.cuh (C a multiple of 16, even width); the cases above take the gather kernel:
    ([16, 14, 14], [40, 16, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),   # 4-byte patch copies, M off the tile
    ([32, 12, 20], [72, 32, 3, 3], [1, 1], [2, 2, 2, 2], [2, 2], 1),   # dilation 2, 8-byte copies
    ([48, 9, 12], [24, 48, 3, 3], [1, 1], [0, 0, 0, 0], [1, 1], 1),    # pad 0
    ([16, 20, 20], [136, 16, 3, 3], [2, 2], [1, 0, 2, 1], [1, 1], 1),  # stride 2, asymmetric pads, 2 M tiles
    ([64, 7, 8], [64, 64, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),     # tiles across several images
    ([32, 40], [48, 32, 3], [1], [1, 1], [1], 1),                      # 1-D
    ([64, 56, 56], [128, 64, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),  # the CNN's 64->128 layer
    # conv_wgmma.cuh on sm_90 with KILN_COMPILE_FLAGS=--conv-wgmma (stride 1, C a multiple of 8; so do
    # the cases above with C = 8, 16, 32, 48, 64 and stride 1):
    ([24, 10, 32], [72, 24, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),   # C = 24 (a partial channel block)
    ([72, 9, 16], [96, 72, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),    # C = 72: two channel blocks, odd H
    ([32, 6, 136], [40, 32, 3, 3], [1, 1], [2, 2, 2, 2], [2, 2], 1),   # width > 64, dilation 2, M off the tile
    ([16, 12, 16], [200, 16, 5, 5], [1, 1], [2, 1, 0, 2], [1, 1], 1),  # 5x5, asymmetric pads, 2 M tiles
    ([8, 5, 8], [8, 8, 1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1),        # 1x1, C = 8
    ([16, 12, 12], [32, 8, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 2),     # groups: the plain path
    ([16, 12, 12], [16, 1, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 16),    # depthwise: the plain path
]


def conv_model(path, t, case):
    xs, ws, strides, pads, dil, group = case
    x = helper.make_tensor_value_info("x", t, ["n"] + xs)
    w = helper.make_tensor_value_info("w", t, ws)
    b = helper.make_tensor_value_info("b", t, [ws[0]])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=strides, pads=pads, dilations=dil, group=group,
                              name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "edge_conv", [x, w, b], [helper.make_tensor_value_info("y", t, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def conv_reference(case, x, w, b):
    _, _, strides, pads, dil, group = case
    nd = len(strides)
    xf = x.float()
    # torch pads symmetrically; asymmetric ONNX pads are an explicit F.pad first.
    pad = []
    for d in reversed(range(nd)):
        pad += [pads[d], pads[d + nd]]
    xf = torch.nn.functional.pad(xf, pad)
    conv = torch.nn.functional.conv1d if nd == 1 else torch.nn.functional.conv2d
    return torch.relu(conv(xf, w.float(), b.float(), stride=strides, dilation=dil, groups=group))


def check_convs(args, dtypes):
    jobs = []
    bf16_cases = {int(c) for c in args.bf16_cases.split(",")} if args.bf16_cases else None
    for dtype in dtypes:
        for i, case in enumerate(CONV_CASES):
            if dtype == torch.bfloat16 and bf16_cases is not None and i not in bf16_cases:
                continue
            name = "conv%d_%s" % (i, str(dtype)[6:])
            path = os.path.join(args.work, name + ".onnx")
            conv_model(path, ONNX_TYPE[dtype], case)
            out = os.path.join(args.work, name)
            command = [args.kiln, "compile", path, "-o", out, "--target", args.arch] + COMPILE_FLAGS
            jobs.append((dtype, i, case, path, out, subprocess.Popen(command, stdout=subprocess.PIPE,
                                                                      stderr=subprocess.STDOUT, text=True)))
    failures = 0
    for dtype, i, case, path, out, p in jobs:
        log = p.communicate()[0]
        if p.returncode != 0:
            print("FAIL compile conv case %d %s:\n%s" % (i, dtype, log[-2000:]))
            failures += 1
            continue
        source = "".join(open(os.path.join(out, f)).read() for f in os.listdir(out) if f.endswith(".cu"))
        path_used = "implicit-GEMM" if "kiln::gemm::conv<" in source else "plain"
        model = KilnModel(out, path)
        for n in (1, 3):
            torch.manual_seed(n + 10 * i)
            x = torch.randn(n, *case[0], device="cuda", dtype=dtype)
            w = torch.randn(*case[1], device="cuda", dtype=dtype) / (case[1][1] * case[1][2]) ** 0.5
            b = torch.randn(case[1][0], device="cuda", dtype=dtype)
            ref = conv_reference(case, x, w, b)
            y = torch.empty(ref.shape, device="cuda", dtype=dtype)
            fn = model.bind(dict(x=x, w=w, b=b), [y])
            y.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = rel_err(y, ref) if not torch.isnan(y).any() else float("nan")
            ok = err <= 2e-2
            failures += 0 if ok else 1
            print("%s conv case %d %s (%s path) x %s w %s: rel err %.2e" % (
                "ok  " if ok else "FAIL", i, str(dtype)[6:], path_used, [n] + case[0], case[1], err), flush=True)
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--work", default="/tmp/kiln-edge")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--kinds", default="mlp,mlpwide,attention,attention64,conv")
    ap.add_argument("--bf16-cases", default="", help="conv cases (indices) also checked in bfloat16 (default: all)")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    os.makedirs(args.work, exist_ok=True)
    jobs = []
    for dtype in (torch.float16, torch.bfloat16):
        # attention: D = 40 (the fused kernel's fp32 fallback); attention64: D = 64 with a scale and
        # a mask (its tensor-core path), both fused (src/lower/TemplateAttention.h).
        # mlpwide: F = 12700 (100 weight tiles of 128 rows, the last one 28 rows): the gate/up
        # product at M <= 16 on the 16-token SWAP_AB tile (kernels/gemm/kiln_gemm.cuh,
        # small_m_takes_swap16).
        for kind, build in (("mlp", mlp_model), ("mlpwide", lambda p, t: mlp_model(p, t, f=WIDE_F)), ("attention", attention_model),
                            ("attention64", lambda p, t: attention_model(p, t, heads=2, d=64, scaled=True))):
            if kind not in kinds:
                continue
            name = "%s_%s" % (kind, str(dtype)[6:])
            path = os.path.join(args.work, name + ".onnx")
            build(path, ONNX_TYPE[dtype])
            out = os.path.join(args.work, name)
            if os.path.isdir(out) and any(f.endswith(".so") for f in os.listdir(out)):  # built by an earlier run
                command = ["true"]
            else:
                command = [args.kiln, "compile", path, "-o", out, "--target", args.arch] + COMPILE_FLAGS
            jobs.append((dtype, kind, path, out, subprocess.Popen(command, stdout=subprocess.PIPE,
                                                                   stderr=subprocess.STDOUT, text=True)))
    failures = check_convs(args, (torch.float16, torch.bfloat16)) if "conv" in kinds else 0
    for dtype, kind, path, out, p in jobs:
        log = p.communicate()[0]
        if p.returncode != 0:
            print("FAIL compile %s %s:\n%s" % (kind, dtype, log[-2000:]))
            failures += 1
            continue
        model = KilnModel(out, path)
        for m in (1, 2, 16, 17, 33, 300):
            torch.manual_seed(m)
            if kind in ("mlp", "mlpwide"):
                f = WIDE_F if kind == "mlpwide" else 200
                w = {n: torch.randn(*s, device="cuda", dtype=dtype) / s[0] ** 0.5
                     for n, s in (("wg", (72, f)), ("wu", (72, f)), ("wd", (f, 72)))}
                x = torch.randn(m, 72, device="cuda", dtype=dtype)
                xf = x.float()
                ref = xf + (torch.tanh(xf @ w["wg"].float()) * (xf @ w["wu"].float())) @ w["wd"].float()
                inputs = dict(w, x=x)
            else:
                heads, d = (2, 64) if kind == "attention64" else (3, 40)
                q, k, v = (torch.randn(2, heads, m, d, device="cuda", dtype=dtype) for _ in range(3))
                w = torch.randn(heads * d, 24, device="cuda", dtype=dtype) / 11
                logits = q.float() @ k.float().transpose(-1, -2)
                inputs = dict(q=q, k=k, v=v, w_proj=w)
                if kind == "attention64":
                    mask = torch.randn(2, 1, m, m, device="cuda", dtype=dtype)
                    logits = logits * 0.125 + mask.float()
                    inputs["mask"] = mask
                c = torch.softmax(logits, dim=-1) @ v.float()
                ref = c.transpose(1, 2).reshape(2, m, heads * d) @ w.float()
            y = torch.empty(ref.shape, device="cuda", dtype=dtype)
            fn = model.bind(inputs, [y])
            y.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = rel_err(y, ref) if not torch.isnan(y).any() else float("nan")
            ok = err <= 2e-2
            failures += 0 if ok else 1
            print("%s %s %s M=%d: rel err %.2e" % ("ok  " if ok else "FAIL", kind, str(dtype)[6:], m, err), flush=True)
    print("%d failed" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
