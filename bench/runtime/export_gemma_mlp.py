"""Exports the Gemma-2B MLP block (RMSNorm, gate/up 2048->16384, tanh-GELU gate, down 16384->2048,
residual; fp32, or fp16 with --float16) at M=1 with torch.onnx.export (opset 17), writes a random
input and PyTorch eager's output for it (TF32 off; for fp16, float32 math on the same fp16 input and
weights, stored as fp16), and times torch.compile(mode="reduce-overhead") of the same block: the
peer of bench_runtime.cpp's graph replay.
Usage: export_gemma_mlp.py OUT_DIR [--float16]          (export, input, eager output, weights in OUT_DIR/block.pt)
       export_gemma_mlp.py OUT_DIR [--float16] --time   (time torch.compile of the same block: OUT_DIR/torch.json)"""
import json
import pathlib
import sys

import torch

HIDDEN, INTER = 2048, 16384


class GemmaMLPBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.Parameter(1 + 0.1 * torch.randn(HIDDEN))
        self.gate = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.up = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.down = torch.nn.Linear(INTER, HIDDEN, bias=False)

    def forward(self, x):
        xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
        return x + self.down(torch.nn.functional.gelu(self.gate(xn), approximate="tanh") * self.up(xn))


def write_with_onnx_helper(model, path):
    """The same block built node by node (the fallback when torch cannot export here)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def const(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.float32), name))

    w = {"norm": model.norm.detach().numpy(), "wg": model.gate.weight.detach().numpy().T.copy(),
         "wu": model.up.weight.detach().numpy().T.copy(), "wd": model.down.weight.detach().numpy().T.copy()}
    n = helper.make_node
    nodes = [const("two", 2.0), const("eps", 1e-6), const("half", 0.5), const("one", 1.0), const("c", 0.044715),
             const("three", 3.0), const("k", float(np.sqrt(2 / np.pi))),
             n("Pow", ["x", "two"], ["sq"]), n("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             n("Add", ["ms", "eps"], ["mse"]), n("Sqrt", ["mse"], ["rms"]), n("Div", ["x", "rms"], ["xr"]),
             n("Mul", ["xr", "norm"], ["xn"]), n("MatMul", ["xn", "wg"], ["g"]), n("MatMul", ["xn", "wu"], ["u"]),
             n("Pow", ["g", "three"], ["g3"]), n("Mul", ["g3", "c"], ["g3c"]), n("Add", ["g", "g3c"], ["in"]),
             n("Mul", ["in", "k"], ["ink"]), n("Tanh", ["ink"], ["t"]), n("Add", ["t", "one"], ["t1"]),
             n("Mul", ["g", "t1"], ["gt"]), n("Mul", ["gt", "half"], ["ge"]), n("Mul", ["ge", "u"], ["h"]),
             n("MatMul", ["h", "wd"], ["d"]), n("Add", ["x", "d"], ["y"])]
    graph = helper.make_graph(nodes, "gemma_mlp_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, HIDDEN])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, HIDDEN])],
                              [numpy_helper.from_array(a, k) for k, a in w.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def time_cuda(fn, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters  # us


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = torch.float16 if "--float16" in sys.argv else torch.float32
    model = GemmaMLPBlock().eval().to(dtype)
    x = torch.randn(1, HIDDEN).to(dtype)
    if "--time" in sys.argv:
        model.load_state_dict(torch.load(out / "block.pt"))
        x = torch.load(out / "x.pt")
        time_torch(model, x, out)
        return
    torch.save(model.state_dict(), out / "block.pt")
    torch.save(x, out / "x.pt")
    with torch.no_grad():
        path = str(out / "gemma_mlp_block.onnx")
        try:
            torch.onnx.export(model, (x,), path, opset_version=17, dynamo=False, input_names=["x"], output_names=["y"])
            print("exported with torch.onnx.export(dynamo=False, opset_version=17)")
        except Exception as e:  # no TorchScript exporter: the default (dynamo) one
            print("torch.onnx.export(dynamo=False) failed:", repr(e)[:300])
            try:
                torch.onnx.export(model, (x,), path, opset_version=17, input_names=["x"], output_names=["y"])
                print("exported with torch.onnx.export(opset_version=17)")
            except Exception as e2:
                print("torch.onnx.export failed:", repr(e2)[:300], "- writing the same block with onnx.helper")
                write_with_onnx_helper(model, path)
        import copy
        y = copy.deepcopy(model).float().cuda()(x.float().cuda()).to(dtype)
        x.numpy().tofile(out / "x.bin")
        y.cpu().numpy().tofile(out / "y_ref.bin")
    print("exported", out / "gemma_mlp_block.onnx")


def time_torch(model, x, out):
    with torch.no_grad():
        model = model.cuda()
        xc = x.cuda()
        y = model(xc)

        eager_us = time_cuda(lambda: model(xc), 200)
        compiled = torch.compile(model, mode="reduce-overhead")
        for _ in range(5):
            compiled(xc)
        torch.cuda.synchronize()
        err = (compiled(xc) - y).abs().max().item()
        compiled_us = time_cuda(lambda: compiled(xc), 1000)
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                compiled(xc)
            torch.cuda.synchronize()
        kernel_us = sum(e.self_device_time_total for e in prof.key_averages()) / 20
    result = {"torch": torch.__version__, "eager_us": eager_us, "compiled_reduce_overhead_us": compiled_us,
              "compiled_kernel_sum_us": kernel_us, "compiled_max_abs_err_vs_eager": err}
    (out / "torch.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
