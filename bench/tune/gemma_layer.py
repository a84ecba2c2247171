#!/usr/bin/env python3
"""A Gemma-2B decoder layer (Pi0.5's PaliGemma backbone) exported from PyTorch, for kiln tune.

    python3 gemma_layer.py OUT.onnx [--tokens 816] [--dtype float16]
    python3 gemma_layer.py OUT.onnx --builder onnx   # the same ops with the onnx package (no torch)
    python3 gemma_layer.py --nodes OUT.onnx     # prints the nodes kiln tune --nodes should search

Hidden 2048, 8 query heads of 256 and one key/value head (multi-query), RoPE, RMSNorm (1 + w),
tanh-GELU(gate) * up MLP of 16384, two residuals; fixed input shape (tuning needs concrete
shapes), torch.onnx.export opset 17 (the TorchScript exporter, as bench/contraction does).
"""
import argparse
import sys

# Nodes that make no kernel worth a search: constants and shape arithmetic.
NOT_KERNELS = {"Constant", "ConstantOfShape", "Shape", "Identity"}


def tunable_nodes(path):
    import onnx
    model = onnx.load(path, load_external_data=False)
    return [n.name for n in model.graph.node if n.op_type not in NOT_KERNELS]


def build_layer(tokens, dtype_name):
    """The layer as a PyTorch module (seed 0, weights halved), on the GPU when there is one."""
    import torch

    class RMSNorm(torch.nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.randn(d) * 0.1)

        def forward(self, x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return (y * (1.0 + self.weight.float())).type_as(x)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class GemmaDecoderLayer(torch.nn.Module):
        def __init__(self, hidden=2048, heads=8, head_dim=256, inter=16384, tokens=816):
            super().__init__()
            self.heads, self.head_dim = heads, head_dim
            self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
            self.q = torch.nn.Linear(hidden, heads * head_dim, bias=False)
            self.k = torch.nn.Linear(hidden, head_dim, bias=False)
            self.v = torch.nn.Linear(hidden, head_dim, bias=False)
            self.o = torch.nn.Linear(heads * head_dim, hidden, bias=False)
            self.gate = torch.nn.Linear(hidden, inter, bias=False)
            self.up = torch.nn.Linear(hidden, inter, bias=False)
            self.down = torch.nn.Linear(inter, hidden, bias=False)
            inv = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            freqs = torch.outer(torch.arange(tokens).float(), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", emb.cos()[None, None], persistent=False)
            self.register_buffer("sin", emb.sin()[None, None], persistent=False)

        def forward(self, x):
            b, s, _ = x.shape
            h = self.norm1(x)
            q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
            k = self.k(h).view(b, s, 1, self.head_dim).transpose(1, 2)
            v = self.v(h).view(b, s, 1, self.head_dim).transpose(1, 2)
            cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            scores = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
            attn = torch.softmax(scores.float(), dim=-1).to(x.dtype)
            ctx = (attn @ v).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
            x = x + self.o(ctx)
            h = self.norm2(x)
            return x + self.down(torch.nn.functional.gelu(self.gate(h), approximate="tanh") * self.up(h))

    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    layer = GemmaDecoderLayer(tokens=tokens).to("cuda" if torch.cuda.is_available() else "cpu", dtype).eval()
    for p in layer.parameters():
        p.data.mul_(0.5)
    return layer


def export(path, tokens, dtype_name, layer=None):
    import torch
    layer = layer if layer is not None else build_layer(tokens, dtype_name)
    x = torch.randn(1, tokens, 2048, dtype=getattr(torch, dtype_name), device=layer.q.weight.device)
    torch.onnx.export(layer, (x,), path, opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)


def onnx_layer(path, tokens, dtype_name):
    """The same layer written with the onnx package (for machines without PyTorch): the exporter's
    op sequence (RMSNorm as Pow/ReduceMean/Add/Sqrt/Div, RoPE as Slice/Neg/Concat, GELU's tanh form)
    with random weights."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    np_dt = np.float16 if dtype_name == "float16" else np.float32
    onnx_dt = TensorProto.FLOAT16 if dtype_name == "float16" else TensorProto.FLOAT
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name="/" + name, **attrs))
        return name

    def rmsnorm(x, p):
        xf = node("Cast", [x], p + "_f", to=TensorProto.FLOAT)
        sq = node("Pow", [xf, const(p + "_two", np.float32(2))], p + "_sq")
        mean = node("ReduceMean", [sq], p + "_mean", axes=[-1], keepdims=1)
        var = node("Add", [mean, const(p + "_eps", np.float32(1e-6))], p + "_var")
        rms = node("Sqrt", [var], p + "_rms")
        y = node("Div", [xf, rms], p + "_norm")
        w = const(p + "_w", (1 + 0.1 * rng.standard_normal(2048)).astype(np.float32))
        return node("Cast", [node("Mul", [y, w], p + "_scaled")], p + "_out", to=onnx_dt)

    def linear(x, k, n, p):
        return node("MatMul", [x, const(p + "_w", (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np_dt))], p)

    def rope(x, heads, p):
        half = 128
        lo = node("Slice", [x, const(p + "_s0", [0]), const(p + "_s1", [half]), const(p + "_ax", [-1])], p + "_lo")
        hi = node("Slice", [x, const(p + "_s2", [half]), const(p + "_s3", [256]), const(p + "_ax2", [-1])], p + "_hi")
        rot = node("Concat", [node("Neg", [hi], p + "_neg"), lo], p + "_rot", axis=-1)
        pos = np.arange(tokens)[:, None] / (10000.0 ** (np.arange(0, 256, 2) / 256.0))[None, :]
        emb = np.concatenate([pos, pos], -1)[None, None]
        a = node("Mul", [x, const(p + "_cos", np.cos(emb).astype(np_dt))], p + "_a")
        b = node("Mul", [rot, const(p + "_sin", np.sin(emb).astype(np_dt))], p + "_b")
        return node("Add", [a, b], p + "_out")

    x = "x"
    h = rmsnorm(x, "norm1")
    q = node("Transpose", [node("Reshape", [linear(h, 2048, 2048, "q"), const("q_shape", [1, tokens, 8, 256])], "q_4d")],
             "q_t", perm=[0, 2, 1, 3])
    k = node("Transpose", [node("Reshape", [linear(h, 2048, 256, "k"), const("k_shape", [1, tokens, 1, 256])], "k_4d")],
             "k_t", perm=[0, 2, 1, 3])
    v = node("Transpose", [node("Reshape", [linear(h, 2048, 256, "v"), const("v_shape", [1, tokens, 1, 256])], "v_4d")],
             "v_t", perm=[0, 2, 1, 3])
    q, k = rope(q, 8, "rq"), rope(k, 1, "rk")
    scores = node("Mul", [node("MatMul", [q, node("Transpose", [k], "k_tt", perm=[0, 1, 3, 2])], "qk"),
                          const("scale", np_dt(256 ** -0.5))], "scores")
    attn = node("Cast", [node("Softmax", [node("Cast", [scores], "scores_f", to=TensorProto.FLOAT)], "probs", axis=-1)],
                "probs_h", to=onnx_dt)
    ctx = node("Reshape", [node("Transpose", [node("MatMul", [attn, v], "pv")], "ctx_t", perm=[0, 2, 1, 3]),
                           const("ctx_shape", [1, tokens, 2048])], "ctx")
    x1 = node("Add", [x, linear(ctx, 2048, 2048, "o")], "res1")
    h2 = rmsnorm(x1, "norm2")
    g = linear(h2, 2048, 16384, "gate")
    c = const
    inner = node("Mul", [node("Add", [g, node("Mul", [node("Pow", [g, c("three", np_dt(3))], "g3"), c("k0", np_dt(0.044715))],
                                                     "g3k")], "gi"), c("k1", np_dt(0.7978845608))], "gs")
    gelu = node("Mul", [node("Mul", [g, c("half", np_dt(0.5))], "gh"),
                        node("Add", [node("Tanh", [inner], "gt"), c("one", np_dt(1))], "g1")], "gelu")
    y = node("Add", [x1, linear(node("Mul", [gelu, linear(h2, 2048, 16384, "up")], "gu"), 16384, 2048, "down")], "y")
    graph = helper.make_graph(nodes, "gemma_layer", [helper.make_tensor_value_info("x", onnx_dt, [1, tokens, 2048])],
                              [helper.make_tensor_value_info(y, onnx_dt, [1, tokens, 2048])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=816)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--nodes", action="store_true", help="print the nodes to search (comma-separated) of OUT")
    ap.add_argument("--builder", choices=["torch", "onnx"], default="torch",
                    help="export from PyTorch (default), or write the same op sequence with the onnx package")
    a = ap.parse_args()
    if a.nodes:
        print(",".join(tunable_nodes(a.out)))
        return 0
    (export if a.builder == "torch" else onnx_layer)(a.out, a.tokens, a.dtype)
    print("wrote %s (%d nodes to search)" % (a.out, len(tunable_nodes(a.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
