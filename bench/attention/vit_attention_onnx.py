# Usage: python3 bench/attention/vit_attention_onnx.py  (writes vit_attn.onnx here); then
#   kiln inspect --kernels vit_attn.onnx
# ViT-like attention block as PyTorch exports it (fp16): LayerNorm, QKV MatMul + bias, Reshape,
# Transpose(2,0,3,1,4), Gather 0/1/2, Transpose k, MatMul, Mul scale, Softmax, MatMul, Transpose,
# Reshape, proj MatMul + bias, residual.
import numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
B, S, C, H = 8, 197, 768, 12; D = C // H
rng = np.random.default_rng(0)
def w(name, shape): return nh.from_array((rng.standard_normal(shape) * 0.02).astype(np.float16), name)
inits = [w("ln_w", [C]), w("ln_b", [C]), w("qkv_w", [C, 3 * C]), w("qkv_b", [3 * C]), w("proj_w", [C, C]), w("proj_b", [C]),
         nh.from_array(np.array([B, S, 3, H, D], np.int64), "qkv_shape"), nh.from_array(np.array([B, S, C], np.int64), "out_shape"),
         nh.from_array(np.array(D ** -0.5, np.float16), "scale"),
         nh.from_array(np.array(0, np.int64), "i0"), nh.from_array(np.array(1, np.int64), "i1"), nh.from_array(np.array(2, np.int64), "i2")]
nodes = [
  h.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["ln"], axis=-1, epsilon=1e-6),
  h.make_node("MatMul", ["ln", "qkv_w"], ["qkv0"]), h.make_node("Add", ["qkv0", "qkv_b"], ["qkv1"]),
  h.make_node("Reshape", ["qkv1", "qkv_shape"], ["qkv2"]), h.make_node("Transpose", ["qkv2"], ["qkv3"], perm=[2, 0, 3, 1, 4]),
  h.make_node("Gather", ["qkv3", "i0"], ["q"], axis=0), h.make_node("Gather", ["qkv3", "i1"], ["k"], axis=0),
  h.make_node("Gather", ["qkv3", "i2"], ["v"], axis=0),
  h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), h.make_node("MatMul", ["q", "kt"], ["s0"]),
  h.make_node("Mul", ["s0", "scale"], ["s1"]), h.make_node("Softmax", ["s1"], ["p"], axis=-1),
  h.make_node("MatMul", ["p", "v"], ["o0"]), h.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
  h.make_node("Reshape", ["o1", "out_shape"], ["o2"]), h.make_node("MatMul", ["o2", "proj_w"], ["o3"]),
  h.make_node("Add", ["o3", "proj_b"], ["o4"]), h.make_node("Add", ["o4", "x"], ["y"])]
g = h.make_graph(nodes, "vit_attn", [h.make_tensor_value_info("x", T.FLOAT16, [B, S, C])], [h.make_tensor_value_info("y", T.FLOAT16, [B, S, C])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]); onnx.checker.check_model(m); onnx.save(m, "vit_attn.onnx")
