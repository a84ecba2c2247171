# The timing peer of attn_check.cu: torch.nn.functional.scaled_dot_product_attention on the same
# shapes ([B, H, S, D] views of one [B, S, 3, H, D] QKV tensor, as the kiln kernel reads them).
import torch, torch.nn.functional as F
def t(dtype, B, H, S, D):
    qkv = torch.randn(B, S, 3, H, D, device="cuda", dtype=dtype)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    for _ in range(10): F.scaled_dot_product_attention(q, k, v)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); a.record()
    for _ in range(100): F.scaled_dot_product_attention(q, k, v)
    b.record(); torch.cuda.synchronize()
    us = a.elapsed_time(b) * 1000 / 100
    print(f"TIME sdpa {str(dtype)[6:]} D={D} B={B} H={H} S={S} {us:.2f} us {4*B*H*S*S*D/us*1e-6:.1f} TFLOP/s")
for args in [(torch.float16, 8, 12, 197, 64), (torch.bfloat16, 8, 12, 197, 64), (torch.float16, 8, 12, 800, 64),
             (torch.float16, 8, 12, 800, 128), (torch.float16, 4, 16, 2048, 128)]:
    t(*args)
