#pragma once
// Host side of the TMA-fed kernels (gemm_wgmma.cuh, conv_wgmma.cuh, kernels/quant's sm_90a GEMMs):
// tiled tensor maps with the 128-byte swizzle wgmma reads, encoded through the driver entry point
// the runtime hands out (no link against libcuda) and cached per thread, and whether the device
// is an sm_90 one (the only one whose kernels these builds hold).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "gemm_problem.cuh"

namespace kiln::gemm::detail {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return PFN_cuTensorMapEncodeTiled_v12000(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Element type of a tensor map: 16-bit floats (GEMM and conv operands) or bytes (kernels/quant's
// packed 4-bit weights).
enum TensorMapElement : int32_t { kMapF16 = 0, kMapBf16 = 1, kMapU8 = 2 };

// A tiled tensor map (128-byte swizzle) of rank 3 (a GEMM operand: contiguous axis, strided axis, flat batch) or 4
// (conv_wgmma.cuh's image). No padding bytes, so memcmp compares the fields only.
struct TensorMapKey {
  const void* data;
  uint64_t dims[4];
  uint64_t strides[3];              // bytes, axes 1 .. rank - 1
  uint32_t box[4] = {0, 0, 1, 1};   // box[k] for k >= 2: 1 unless set
  uint32_t rank = 3;
  int32_t element;  // TensorMapElement
  bool operator==(const TensorMapKey& o) const { return std::memcmp(this, &o, sizeof(*this)) == 0; }
};
static_assert(sizeof(TensorMapKey) == 88, "TensorMapKey: no padding bytes");

// Encodes the map, reusing one of the last few this thread encoded (generated code calls the
// same shapes on the same buffers every inference). Returns false where the driver refuses it.
inline bool encode_tensor_map(const TensorMapKey& key, CUtensorMap& out) {
  constexpr int kSlots = 16;
  thread_local TensorMapKey keys[kSlots];
  thread_local CUtensorMap maps[kSlots];
  thread_local int used = 0, next = 0;
  for (int i = 0; i < used; ++i)
    if (keys[i] == key) {
      out = maps[i];
      return true;
    }
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) return false;
  const cuuint32_t elem[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = key.element == kMapU8     ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : key.element == kMapBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                             : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = encode(&out, type, key.rank, const_cast<void*>(key.data), key.dims, key.strides, key.box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return false;
  keys[next] = key;
  maps[next] = out;
  next = (next + 1) % kSlots;
  if (used < kSlots) ++used;
  return true;
}

// The element stride between consecutive flat batch indices of `op`, if its batch offset is
// linear in the flat index (0: broadcast along every batch axis); -1 if it is not.
inline int64_t flat_batch_stride(const Problem& p, const Operand& op) {
  int64_t inner = 0, extent_below = 1;
  bool found = false;
  for (int d = p.batch_rank - 1; d >= 0; --d) {
    if (p.batch_extent[d] == 1) continue;
    if (!found) {
      inner = op.batch_stride[d], found = true;
    } else if (op.batch_stride[d] != inner * extent_below) {
      return -1;
    }
    extent_below *= p.batch_extent[d];
  }
  return inner;
}

// Builds the tensor map of an operand read with `k_major` tiles: a box of 64 k x `rows` rows, or
// of 64 m/n x 64 k. `mn` is the operand's m or n extent.
inline bool operand_tensor_map(const Problem& p, const Operand& op, int64_t mn, bool k_major, int rows, bool bf16, int64_t batch,
                               bool& batched, CUtensorMap& out) {
  constexpr int64_t kEl = 2;
  if (reinterpret_cast<uintptr_t>(op.data) % 16 != 0) return false;
  const int64_t inner = k_major ? p.k : mn, outer = k_major ? mn : p.k;
  int64_t outer_stride = k_major ? op.stride_mn : op.stride_k;
  if ((k_major ? op.stride_k : op.stride_mn) != 1) return false;
  if (outer == 1) outer_stride = (inner + 7) / 8 * 8;  // a single row: its stride is never used
  if (outer_stride < inner || (outer_stride * kEl) % 16 != 0) return false;
  const int64_t bstride = flat_batch_stride(p, op);
  if (bstride < 0 || (bstride * kEl) % 16 != 0) return false;
  batched = batch > 1 && bstride != 0;
  TensorMapKey key{};
  key.data = op.data;
  key.dims[0] = uint64_t(inner), key.dims[1] = uint64_t(outer), key.dims[2] = uint64_t(batched ? batch : 1);
  key.strides[0] = uint64_t(outer_stride * kEl);
  key.strides[1] = uint64_t(batched ? bstride * kEl : outer_stride * kEl * outer);
  if (key.strides[0] >= (uint64_t(1) << 40) || key.strides[1] >= (uint64_t(1) << 40)) return false;
  key.box[0] = 64, key.box[1] = uint32_t(k_major ? rows : 64);
  key.element = bf16 ? kMapBf16 : kMapF16;
  return encode_tensor_map(key, out);
}

inline int device_is_sm90() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return 0;
  return major == 9 && minor == 0;
}

}  // namespace kiln::gemm::detail
