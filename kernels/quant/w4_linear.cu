// The kernel-contract entry points of libkiln_quant (include/kiln/runtime/kiln_abi.h), each also
// exported under TVM-FFI's C ABI as __tvm_ffi_<name> (include/kiln/runtime/tvm_ffi_export.h):
//
//   kiln_w4_linear_<fmt>_<dt>         y = x · dequant(W)ᵀ
//   kiln_w4_linear_bias_<fmt>_<dt>    y = x · dequant(W)ᵀ + bias
//   kiln_w4_gate_up_<fmt>_<dt>_<act>  h = act(x · Gᵀ) ⊙ (x · Uᵀ), G/U interleaved (Prepack.h)
//   kiln_w4_mlp_<fmt>_<dt>_<act>      y = h · dequant(D)ᵀ with h as above (h in the workspace)
//
// fmt: nvfp4 | mxfp4 | int4; dt: bf16 | f16 (activations, outputs; INT4 scales and zeros);
// act: geglu (tanh GELU) | swiglu. Weights are in kernel nibble order (kiln::quant::prepack).
// Shapes the kernels do not take (n not a multiple of 16, k not a multiple of 128, a wrong block
// count) and misaligned pointers are refused with a status and kiln_last_error(), never run.
#include <cstdio>
#include <string>
#include <vector>

#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/tvm_ffi_export.h"
#include "kiln/runtime/validate.h"
#include "w4_launch.cuh"

namespace kiln::quant::gpu {
namespace {

enum class Entry { Linear, LinearBias, GateUp, Mlp };

constexpr DLDataType kU8{kDLUInt, 8, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};
template <typename T>
constexpr DLDataType dl_type() {
  return IsBf16<T>::value ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 16, 1};
}
template <Format F>
constexpr const char* format_str() {
  return F == Format::NvFp4 ? "nvfp4" : F == Format::MxFp4 ? "mxfp4" : "int4";
}
template <typename T>
constexpr const char* dtype_str() {
  return IsBf16<T>::value ? "bf16" : "f16";
}
inline const char* act_str(Activation a) { return a == Activation::GeluTanh ? "geglu" : "swiglu"; }

// One weight operand (data, scales, tensor scale, zeros) in a parameter list.
struct ParamBuilder {
  std::vector<std::string> names;
  std::vector<std::vector<KilnDim>> shapes;
  std::vector<KilnParam> params;

  void add(const std::string& name, DLDataType dtype, std::vector<KilnDim> shape, int align, bool out = false) {
    names.push_back(name);
    shapes.push_back(std::move(shape));
    params.push_back(KilnParam{nullptr, dtype, int32_t(shapes.back().size()), nullptr, align, out ? 1 : 0});
  }
  template <Format F, typename T>
  void add_weight(const std::string& prefix, KilnDim rows, KilnDim half, KilnDim groups, int64_t tensor_scales) {
    add(prefix, kU8, {rows, half}, 16);
    if constexpr (F == Format::Int4) {
      add(prefix + "_scale", dl_type<T>(), {rows, groups}, 4);
      add(prefix + "_zero", dl_type<T>(), {rows, groups}, 4);
    } else {
      add(prefix + "_scale", kU8, {rows, groups}, 4);
    }
    if constexpr (F == Format::NvFp4) add(prefix + "_scale_2", kF32, {tensor_scales}, 4);
  }
  void finish() {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].name = names[i].c_str();
      params[i].shape = shapes[i].data();
    }
  }
};


// Symbols: linear/gate_up: m n k k_half k_groups [i]; mlp: m h h_half h_groups n2 i_half i_groups.
template <Format F, typename T, Entry E>
size_t workspace_bytes(const int64_t* s) {
  const int m = int(s[0]);
  if constexpr (E == Entry::Mlp) {
    const int h = int(s[1]), n2 = int(s[4]), i = n2 / 2;
    const size_t hidden = (size_t(m) * i * sizeof(T) + 255) / 256 * 256;
    return hidden + std::max(linear_partial_bytes(m, n2, h), linear_partial_bytes(m, h, i));
  } else {
    return linear_partial_bytes(m, int(s[1]), int(s[2]));
  }
}

template <Format F, typename T, Entry E, Activation A>
struct Signature {
  ParamBuilder pb;
  std::string name, text;
  std::vector<const char*> symbol_names;
  std::vector<int64_t> divisors, minimums;
  KilnSignature sig{};

  Signature() {
    const DLDataType t = dl_type<T>();
    const KilnDim M = KILN_DIM_SYMBOL(0);
    name = std::string("w4_") +
           (E == Entry::Linear ? "linear" : E == Entry::LinearBias ? "linear_bias" : E == Entry::GateUp ? "gate_up" : "mlp") +
           "_" + format_str<F>() + "_" + dtype_str<T>() + (E == Entry::GateUp || E == Entry::Mlp ? std::string("_") + act_str(A) : "");
    if constexpr (E == Entry::Mlp) {
      symbol_names = {"m", "h", "h_half", "h_groups", "n2", "i_half", "i_groups"};
      divisors = {1, 128, 1, 1, 256, 1, 1};
      minimums = {1, 128, 1, 1, 256, 1, 1};
      const KilnDim H = KILN_DIM_SYMBOL(1), N2 = KILN_DIM_SYMBOL(4);
      pb.add("x", t, {M, H}, 16);
      pb.add_weight<F, T>("w_gate_up", N2, KILN_DIM_SYMBOL(2), KILN_DIM_SYMBOL(3), 2);
      pb.add_weight<F, T>("w_down", H, KILN_DIM_SYMBOL(5), KILN_DIM_SYMBOL(6), 1);
      pb.add("y", t, {M, H}, 2, true);
    } else {
      symbol_names = {"m", "n", "k", "k_half", "k_groups"};
      divisors = {1, 16, 128, 1, 1};
      minimums = {1, 16, 128, 1, 1};
      const KilnDim N = KILN_DIM_SYMBOL(1), K = KILN_DIM_SYMBOL(2);
      pb.add("x", t, {M, K}, 16);
      pb.add_weight<F, T>("weight", N, KILN_DIM_SYMBOL(3), KILN_DIM_SYMBOL(4), E == Entry::GateUp ? 2 : 1);
      if constexpr (E == Entry::LinearBias) pb.add("bias", t, {N}, 2);
      if constexpr (E == Entry::GateUp) {
        symbol_names.push_back("i");
        divisors.push_back(8);
        minimums.push_back(8);
        pb.add("h", t, {M, KILN_DIM_SYMBOL(5)}, 2, true);
      } else {
        pb.add("y", t, {M, N}, 2, true);
      }
    }
    pb.finish();
    text = name + "(";
    for (size_t i = 0; i < pb.params.size(); ++i) {
      text += (i ? ", " : "") + pb.names[i] + ": [";
      for (size_t d = 0; d < pb.shapes[i].size(); ++d) {
        const KilnDim v = pb.shapes[i][d];
        text += (d ? ", " : "") + (KILN_DIM_IS_SYMBOL(v) ? std::string(symbol_names[KILN_DIM_SYMBOL_INDEX(v)]) : std::to_string(v));
      }
      text += std::string("] ") + abi::dl_dtype_name(pb.params[i].dtype);
    }
    text += ")";
    sig.name = name.c_str();
    sig.abi_version = KILN_ABI_VERSION;
    sig.device_type = kDLCUDA;
    sig.num_params = int32_t(pb.params.size());
    sig.params = pb.params.data();
    sig.num_symbols = int32_t(symbol_names.size());
    sig.symbol_names = symbol_names.data();
    sig.symbol_divisors = divisors.data();
    sig.symbol_minimums = minimums.data();
    sig.workspace_bytes = &workspace_bytes<F, T, E>;
    sig.text = text.c_str();
    sig.json = "{}";
  }
  static const KilnSignature* get() {
    static const Signature instance;
    return &instance.sig;
  }
};

constexpr int64_t format_group(Format f) { return f == Format::NvFp4 ? 16 : 32; }

// k_half and k_groups against k; the group of INT4 is read from the scale shape.
template <Format F>
int32_t check_blocks(const KilnSignature& sig, const char* what, int64_t k, int64_t half, int64_t groups, int* group) {
  abi::ArgumentError error(sig, &abi::last_error_storage());
  if (half * 2 != k) {
    return error.fail(KILN_ERR_SHAPE, std::string(what) + " has " + std::to_string(half) + " bytes per row, expected k/2 = " +
                                          std::to_string(k / 2));
  }
  const int64_t g = k % groups == 0 ? k / groups : 0;
  const bool ok = F == Format::Int4 ? (g == 32 || g == 64 || g == 128) : g == format_group(F);
  if (!ok) {
    return error.fail(KILN_ERR_SHAPE, std::string(what) + "_scale has " + std::to_string(groups) + " blocks per row for k = " +
                                          std::to_string(k) + ", expected k/" +
                                          (F == Format::Int4 ? std::string("{32, 64, 128}") : std::to_string(format_group(F))));
  }
  *group = int(g);
  return KILN_OK;
}

// Fills the weight fields of `p` from args[first..].
template <Format F>
int fill_weight(LinearParams& p, const DLTensor* args, int first) {
  auto ptr = [&](int i) { return static_cast<const uint8_t*>(args[i].data) + args[i].byte_offset; };
  p.weight = ptr(first);
  p.scale = ptr(first + 1);
  int next = first + 2;
  p.zero = nullptr;
  p.scale2 = nullptr;
  if constexpr (F == Format::Int4) p.zero = ptr(next++);
  if constexpr (F == Format::NvFp4) p.scale2 = reinterpret_cast<const float*>(ptr(next++));
  return next;
}

inline int32_t launch_status(const KilnSignature& sig, cudaError_t e) {
  if (e == cudaSuccess) return KILN_OK;
  abi::last_error_storage() = std::string(sig.name) + ": CUDA launch failed: " + cudaGetErrorString(e);
  return KILN_ERR_LAUNCH;
}

template <Format F, typename T, Entry E, Activation A>
int32_t call(const DLTensor* args, int32_t num_args, void* workspace, void* stream_ptr) {
  const KilnSignature& sig = *Signature<F, T, E, A>::get();
  int64_t s[8];
  if (int32_t st = abi::validate_arguments(sig, args, num_args, s, &abi::last_error_storage())) return st;
  auto data = [&](int i) { return static_cast<void*>(static_cast<uint8_t*>(args[i].data) + args[i].byte_offset); };
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  abi::ArgumentError error(sig, &abi::last_error_storage());
  const size_t need = sig.workspace_bytes(s);
  if (need > 0 && workspace == nullptr) {
    return error.fail(KILN_ERR_WORKSPACE, "needs " + std::to_string(need) + " bytes of workspace, got none");
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    return error.fail(KILN_ERR_WORKSPACE, "workspace is not 256-byte aligned");
  }
  LinearParams p{};
  p.x = data(0);
  p.m = int(s[0]);
  if constexpr (E == Entry::Mlp) {
    const int64_t h = s[1], n2 = s[4], i = n2 / 2;
    int g1 = 0, g2 = 0;
    if (int32_t st = check_blocks<F>(sig, "w_gate_up", h, s[2], s[3], &g1)) return st;
    if (i % 128 != 0) return error.fail(KILN_ERR_SHAPE, "n2/2 = " + std::to_string(i) + " is not a multiple of 128");
    if (int32_t st = check_blocks<F>(sig, "w_down", i, s[5], s[6], &g2)) return st;
    const size_t hidden_bytes = (size_t(p.m) * i * sizeof(T) + 255) / 256 * 256;
    void* hidden = workspace;
    void* partial = static_cast<uint8_t*>(workspace) + hidden_bytes;
    int next = fill_weight<F>(p, args, 1);
    p.n = int(n2);
    p.k = int(h);
    p.group = g1;
    p.act = A;
    p.bias = nullptr;
    p.y = hidden;
    if (int32_t st = launch_status(sig, launch_linear<F, T>(p, partial, stream))) return st;
    LinearParams d = p;
    d.x = hidden;
    fill_weight<F>(d, args, next);
    d.n = int(h);
    d.k = int(i);
    d.group = g2;
    d.act = Activation::None;
    d.y = data(num_args - 1);
    return launch_status(sig, launch_linear<F, T>(d, partial, stream));
  } else {
    if (int32_t st = check_blocks<F>(sig, "weight", s[2], s[3], s[4], &p.group)) return st;
    int next = fill_weight<F>(p, args, 1);
    p.n = int(s[1]);
    p.k = int(s[2]);
    p.bias = nullptr;
    p.act = Activation::None;
    if constexpr (E == Entry::LinearBias) p.bias = data(next++);
    if constexpr (E == Entry::GateUp) {
      if (s[5] * 2 != s[1]) {
        return error.fail(KILN_ERR_SHAPE, "h.shape[1] is " + std::to_string(s[5]) + ", expected n/2 = " + std::to_string(s[1] / 2));
      }
      p.act = A;
    }
    p.y = data(next);
    return launch_status(sig, launch_linear<F, T>(p, workspace, stream));
  }
}

}  // namespace
}  // namespace kiln::quant::gpu

using kiln::quant::gpu::Activation;
using kiln::quant::gpu::Entry;
using kiln::quant::gpu::Format;

#define KILN_W4_EXPORT __attribute__((visibility("default")))

#define KILN_W4_ENTRY(cname, F, T, E, A)                                                              \
  extern "C" KILN_W4_EXPORT int32_t kiln_##cname(const DLTensor* args, int32_t n, void* ws, void* stream) {          \
    return kiln::quant::gpu::call<F, T, E, A>(args, n, ws, stream);                                    \
  }                                                                                                    \
  extern "C" KILN_W4_EXPORT const KilnSignature* kiln_signature_##cname(void) {                                      \
    return kiln::quant::gpu::Signature<F, T, E, A>::get();                                             \
  }                                                                                                    \
  KILN_TVM_FFI_EXPORT(cname)

#define KILN_W4_FAMILY(fmt, F, dt, T)                                                        \
  KILN_W4_ENTRY(w4_linear_##fmt##_##dt, F, T, Entry::Linear, Activation::None)               \
  KILN_W4_ENTRY(w4_linear_bias_##fmt##_##dt, F, T, Entry::LinearBias, Activation::None)      \
  KILN_W4_ENTRY(w4_gate_up_##fmt##_##dt##_geglu, F, T, Entry::GateUp, Activation::GeluTanh)  \
  KILN_W4_ENTRY(w4_gate_up_##fmt##_##dt##_swiglu, F, T, Entry::GateUp, Activation::Silu)     \
  KILN_W4_ENTRY(w4_mlp_##fmt##_##dt##_geglu, F, T, Entry::Mlp, Activation::GeluTanh)         \
  KILN_W4_ENTRY(w4_mlp_##fmt##_##dt##_swiglu, F, T, Entry::Mlp, Activation::Silu)

KILN_W4_FAMILY(nvfp4, Format::NvFp4, bf16, __nv_bfloat16)
KILN_W4_FAMILY(nvfp4, Format::NvFp4, f16, __half)
KILN_W4_FAMILY(mxfp4, Format::MxFp4, bf16, __nv_bfloat16)
KILN_W4_FAMILY(mxfp4, Format::MxFp4, f16, __half)
KILN_W4_FAMILY(int4, Format::Int4, bf16, __nv_bfloat16)
KILN_W4_FAMILY(int4, Format::Int4, f16, __half)

#define KILN_W4_ROW(cname) {#cname, &kiln_##cname, &kiln_signature_##cname},
#define KILN_W4_ROWS(fmt, dt)                                                                        \
  KILN_W4_ROW(w4_linear_##fmt##_##dt) KILN_W4_ROW(w4_linear_bias_##fmt##_##dt)                       \
  KILN_W4_ROW(w4_gate_up_##fmt##_##dt##_geglu) KILN_W4_ROW(w4_gate_up_##fmt##_##dt##_swiglu)         \
  KILN_W4_ROW(w4_mlp_##fmt##_##dt##_geglu) KILN_W4_ROW(w4_mlp_##fmt##_##dt##_swiglu)

extern "C" KILN_W4_EXPORT int32_t kiln_library_functions(const KilnFunction** functions) {
  static const KilnFunction table[] = {KILN_W4_ROWS(nvfp4, bf16) KILN_W4_ROWS(nvfp4, f16) KILN_W4_ROWS(mxfp4, bf16)
                                           KILN_W4_ROWS(mxfp4, f16) KILN_W4_ROWS(int4, bf16) KILN_W4_ROWS(int4, f16)};
  if (functions) *functions = table;
  return int32_t(sizeof(table) / sizeof(table[0]));
}

extern "C" KILN_W4_EXPORT const char* kiln_last_error(void) { return kiln::abi::last_error_storage().c_str(); }

// Which M >= 17 kernel the calling thread's last GEMM ran ("wgmma", or why the mma.sync one ran):
// lets a benchmark tell GEMM variants 3 and 4 from their fallback. Not part of the kernel contract.
extern "C" KILN_W4_EXPORT const char* kiln_w4_last_gemm_path(void) { return kiln::quant::gpu::last_gemm_path; }
