#pragma once
// What identifies a kernel across runs, models and machines (the key of tuning records,
// tune/Records.h): a structural hash of its computation (the unscheduled loop nest with every
// name replaced by its order of first use, so two LayerNorms of the same shape in different
// layers or models share records), its dtypes and its shape.
#include <string>

#include "kiln/codegen/GraphFunctions.h"

namespace kiln::tune {

struct KernelKey {
  std::string hash;    // 16 hex digits
  std::string dtypes;  // "float16,float16,float16->float16" (inputs -> outputs)
  std::string shape;   // "8192x4096,4096,4096->8192x4096"; symbols by name ("batchx4096")
  bool operator==(const KernelKey&) const = default;
};

KernelKey kernel_key(const codegen::KernelDefinition& kernel);

}  // namespace kiln::tune
