#!/usr/bin/env python3
"""Writes the ViT block and the small CNN of bench/contraction/bench.py as ONNX models of fixed
shape (kiln tune measures concrete shapes): torch.onnx.export, opset 17, fp16, on the GPU.

  hidden_models.py OUT_DIR [--bench bench/contraction/bench.py]

  OUT_DIR/vit.onnx: ViTBlock (768 wide, 12 heads), x [8, 197, 768]
  OUT_DIR/cnn.onnx: SmallCNN (4 x Conv3x3 + BatchNorm + ReLU, 64-128 channels), x [32, 3, 56, 56]
"""
import argparse
import importlib.util
import os

import torch


def load(path):
    spec = importlib.util.spec_from_file_location("kiln_contraction_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--bench", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contraction", "bench.py"))
    args = ap.parse_args()
    bench = load(args.bench)
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    models = [("vit", bench.ViTBlock(), (8, 197, 768)), ("cnn", bench.SmallCNN(), (32, 3, 56, 56))]
    for name, module, shape in models:
        module = module.cuda().half().eval()
        path = os.path.join(args.out, name + ".onnx")
        bench.export(module, torch.randn(*shape, device="cuda", dtype=torch.float16), path, None)
        print("wrote %s (x %s)" % (path, "x".join(map(str, shape))))


if __name__ == "__main__":
    main()
