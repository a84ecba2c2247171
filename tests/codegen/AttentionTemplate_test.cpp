// The fused attention template (kernels/gemm/attention.cuh), instantiated the way generated code
// instantiates the contraction templates (an epilogue functor with the output buffer as a member,
// q/k/v addressed in place in one QKV buffer), compiles without warnings for sm_80, sm_90 and
// sm_110 from the embedded support files: fp16 with head dim 64, bf16 with head dim 128 (the
// tensor-core paths) and a head dim of 80 (the fallback). Running it needs a GPU:
// bench/attention/device_check.sh checks every edge shape against an fp32 reference.
#include <gtest/gtest.h>

#include "CompileCuda.h"
#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"

namespace kiln {
namespace {

TEST(AttentionTemplate, EmbeddedAsSupportFile) {
  bool found = false;
  for (const auto& [name, text] : codegen::support_files()) {
    if (name.find("gemm/attention.cuh") != std::string::npos) found = text.find("attention_tc_kernel") != std::string::npos;
  }
  EXPECT_TRUE(found) << "kernels/gemm/attention.cuh is not among the support files generated code includes";
}

TEST(AttentionTemplate, CallsCompileForEveryArchitecture) {
  const std::string source = R"(#include <cuda_runtime.h>
#include "kiln/gemm/attention.cuh"

template <typename T>
struct attention_epilogue {
  T* out;
  int64_t heads, seq, head_dim;
  __device__ __forceinline__ void operator()(int64_t b, int64_t i, int64_t d, float o) const {
    // out[batch, seq, heads * head_dim], b = batch * heads + head
    out[((b / heads) * seq + i) * heads * head_dim + (b % heads) * head_dim + d] = static_cast<T>(o);
  }
};

template <typename T, int D>
cudaError_t call(const T* qkv, T* out, int64_t batch, int64_t heads, int64_t seq, cudaStream_t stream) {
  kiln::gemm::AttentionProblem p;
  p.seq_q = seq;
  p.seq_k = seq;
  p.batch_rank = 2;
  p.batch_extent[0] = batch;
  p.batch_extent[1] = heads;
  p.scale = 0.125f;
  kiln::gemm::AttentionOperand* ops[3] = {&p.q, &p.k, &p.v};
  for (int w = 0; w < 3; ++w) {
    ops[w]->data = qkv + w * heads * D;
    ops[w]->stride_row = 3 * heads * D;
    ops[w]->batch_stride[0] = seq * 3 * heads * D;
    ops[w]->batch_stride[1] = D;
  }
  const attention_epilogue<T> epilogue{out, heads, seq, D};
  return kiln::gemm::attention<T, D>(p, epilogue, stream);
}

extern "C" int attention_calls(const void* qkv, void* out, int64_t batch, int64_t heads, int64_t seq, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = call<__half, 64>(static_cast<const __half*>(qkv), static_cast<__half*>(out), batch, heads, seq, s);
  if (e == cudaSuccess)
    e = call<__nv_bfloat16, 128>(static_cast<const __nv_bfloat16*>(qkv), static_cast<__nv_bfloat16*>(out), batch, heads, seq, s);
  if (e == cudaSuccess) e = call<__half, 80>(static_cast<const __half*>(qkv), static_cast<__half*>(out), batch, heads, seq, s);
  return static_cast<int>(e);
}
)";
  test::expect_cuda_compiles_for_every_architecture("attention_template", source);
}

}  // namespace
}  // namespace kiln
