#pragma once
// Schedules are data, not code (DESIGN.md): a list of loop transformations per stage, named by
// the stage's tensor and its axes. Applying them is a lowering pass (src/lower/ApplySchedule.cpp).
// The default schedules per op family live in schedule/Defaults.h; tuning records are this same
// data serialized to JSON (tune/).
#include <map>
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
};

struct StageSchedule {
  std::vector<LoopTransform> transforms;
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

 private:
  std::map<std::string, StageSchedule> stages_;
};

}  // namespace kiln
