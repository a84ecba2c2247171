#pragma once
// Schedules are data, not code (DESIGN.md): a list of loop transformations per stage, named by
// the stage's tensor and its axes. Applying them is a lowering pass (src/lower/ApplySchedule.cpp).
// The default schedules per op family live in schedule/Defaults.h; tuning records are this same
// data serialized to JSON (tune/).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/IR.h"

namespace kiln {

// One loop transformation. Loops are named: a stage's axes are "i0", "i1", ... (output dims) and
// "r0", "r1", ... (reduction axes); split creates "<loop>.o" and "<loop>.i"; fuse "<a>.<b>".
struct LoopTransform {
  enum class Kind : uint8_t {
    Split,      // loop -> (outer, inner) with inner extent `factor`
    Fuse,       // adjacent loops loop, loop2 -> one
    Reorder,    // the loops in `order` are permuted into this order
    Bind,       // loop -> a GPU grid/block index (for_kind)
    Vectorize,  // loop -> vector lanes (extent must be a constant)
    Unroll,
  };
  Kind kind;
  std::string loop;
  std::string loop2;               // Fuse
  int64_t factor = 0;              // Split
  std::vector<std::string> order;  // Reorder
  ir::ForKind for_kind = ir::ForKind::Serial;  // Bind

  static LoopTransform split(std::string loop, int64_t factor) {
    LoopTransform t;
    t.kind = Kind::Split;
    t.loop = std::move(loop);
    t.factor = factor;
    return t;
  }
  static LoopTransform fuse(std::string loop, std::string loop2) {
    LoopTransform t;
    t.kind = Kind::Fuse;
    t.loop = std::move(loop);
    t.loop2 = std::move(loop2);
    return t;
  }
  static LoopTransform reorder(std::vector<std::string> order) {
    LoopTransform t;
    t.kind = Kind::Reorder;
    t.order = std::move(order);
    return t;
  }
  static LoopTransform bind(std::string loop, ir::ForKind kind) {
    LoopTransform t;
    t.kind = Kind::Bind;
    t.loop = std::move(loop);
    t.for_kind = kind;
    return t;
  }
  static LoopTransform vectorize(std::string loop) {
    LoopTransform t;
    t.kind = Kind::Vectorize;
    t.loop = std::move(loop);
    return t;
  }
  static LoopTransform unroll(std::string loop) {
    LoopTransform t;
    t.kind = Kind::Unroll;
    t.loop = std::move(loop);
    return t;
  }
};

// A contraction stage (te/Contraction.h) computed as tiles of its matrix product: a block per
// `m` x `n` output tile, a step of `k` along the reduction at a time through shared memory
// (cooperative loads, barriers), each thread accumulating `thread_m` x `thread_n` outputs in
// registers (src/lower/TileContraction.cpp). (m / thread_m) * (n / thread_n) threads per block;
// m * k and n * k are multiples of that.
struct ContractionTile {
  int64_t m = 0, n = 0, k = 0;
  int64_t thread_m = 0, thread_n = 0;
  int64_t threads() const { return (m / thread_m) * (n / thread_n); }
};

struct StageSchedule {
  std::vector<LoopTransform> transforms;
  // Set: the stage is built as a tiled contraction when it is one after inlining (the
  // transforms are the schedule otherwise).
  std::optional<ContractionTile> contraction_tile;
  std::string contraction_description;
  // Set: the stage runs a contraction template of kernels/gemm/ (a TemplateContraction,
  // src/lower/TemplateContraction.cpp) when its factors allow (float16/bfloat16 buffers read at
  // affine addresses); the contraction tile is the fallback otherwise.
  std::optional<ir::GemmTemplate> gemm_template;
  // > 0 (reductions only): the innermost reduction loop is spread over this many threads of a
  // block (a multiple of 32), whose partial results a block-wide all-reduce combines
  // (src/lower/CrossThreadReduce.cpp). The output loops must be bound to blocks only.
  int64_t reduce_threads = 0;
  // > 1 (with reduce_threads): each thread reads this many consecutive elements of the row per
  // step (a vectorized loop, so 16-byte loads) when the row length is a multiple of it.
  int64_t reduce_vector = 1;
  // > 1 (reductions over outer axes whose outputs are bound to threadIdx.x): the outermost
  // reduction loop is spread over this many threads in threadIdx.y, with an accumulator per lane
  // of the output's Vectorized loop (16-byte loads along the contiguous axis) and the partial
  // results combined through shared memory (src/lower/SplitColumnReduction.cpp).
  int64_t reduce_row_threads = 0;
  std::string description;  // one line, printed above the generated kernel
};

class Schedule {
 public:
  StageSchedule& stage(const std::string& tensor_name) { return stages_[tensor_name]; }
  const StageSchedule* find(const std::string& tensor_name) const {
    auto it = stages_.find(tensor_name);
    return it == stages_.end() ? nullptr : &it->second;
  }
  bool empty() const { return stages_.empty(); }

  // Adjacent stages whose outer loop is the same block-bound loop over rows (a softmax's max,
  // sum and normalize) run as one kernel, a block per row (src/lower/FuseRowStages.cpp).
  bool fuse_row_stages = false;
  // Float divisions by loop-invariant divisors become multiplications by a reciprocal computed
  // once before the loop (src/lower/ReciprocalDivisors.cpp); an ulp of rounding for a division
  // per element. The CPU reference keeps exact division.
  bool reciprocal_divisors = false;
  // Float16/bfloat16 intermediates of a fused elementwise chain stay in float32 instead of being
  // rounded to their type between ops (src/lower/FloatIntermediates.cpp); results move toward the
  // exact value by up to an intermediate's rounding. Off by default: every op rounds, as the CPU
  // reference does.
  bool float_intermediates = false;
  // > 0 (with fuse_row_stages): a buffer that several stages of a row kernel read through the
  // same per-thread vector slices is read once per row into registers, up to this many bytes per
  // thread (src/lower/CacheRowReads.cpp): one read from memory instead of one per stage.
  int64_t cache_row_bytes = 0;

 private:
  std::map<std::string, StageSchedule> stages_;
};

}  // namespace kiln
