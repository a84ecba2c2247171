"""One call of a model that bench.py already exported and compiled (its --work folder), between
cudaProfilerStart/Stop, for `ncu --profile-from-start off` (GPU machine):
    ncu --profile-from-start off --kernel-name regex:wgmma --section SpeedOfLight \\
        --section WarpStateStats python3 bench/contraction/ncu_model.py vit
Models and inputs as bench.py times them: vit (8x197x768), mlp (1x816x2048), cnn (32x3x56x56)."""
import argparse
import importlib.util
import os

import torch

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench", os.path.join(here, "bench.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

SHAPES = {"vit": (8, 197, 768), "mlp": (1, 816, 2048), "cnn": (32, 3, 56, 56)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(SHAPES))
    ap.add_argument("--work", default="/tmp/kiln-contraction")
    args = ap.parse_args()
    k = bench.KilnModel(os.path.join(args.work, args.model), os.path.join(args.work, args.model + ".onnx"))
    x = torch.randn(*SHAPES[args.model], device="cuda", dtype=torch.float16)
    out_shape = {"vit": SHAPES["vit"], "mlp": SHAPES["mlp"], "cnn": (32, 128, 56, 56)}[args.model]
    out = torch.empty(out_shape, device="cuda", dtype=torch.float16)
    fn = k.bind({"x": x}, [out])
    fn()  # warm-up: tensor maps, attributes
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
