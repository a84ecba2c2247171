#pragma once
// Model libraries (`kiln compile --model`, docs/ARCHITECTURE.md "Model libraries"): the whole
// graph as one function `main` over the graph's inputs and outputs only, with the model's
// initializers and Constant outputs owned by the library (runtime/kiln_model.h). This file
// decides which tensors the library owns, writes the weights file and prints the translation
// unit that holds the weights' layout, the compiled-in weights and the C API
// (codegen/runtime/kiln_model_weights.h).
#include <string>
#include <vector>

#include "kiln/codegen/GraphFunctions.h"

namespace kiln::package {

struct ModelWeights {
  std::vector<int> constants;        // indices into the function's inputs that the library owns
  std::string source;                // the weights translation unit (C++ or CUDA)
  std::string weights_file;          // file name written next to the library, "" when none
  uint64_t file_payload_bytes = 0;   // bytes after the file's header
  uint64_t embedded_bytes = 0;       // bytes compiled in
};

// Writes `dir`/<model>.weights (when some weight is larger than KILN_MODEL_EMBED_BYTES) and
// returns the rest. `f` is the whole graph lowered as one function.
ModelWeights write_model_weights(const codegen::GraphFunction& f, codegen::Target target, const std::string& model,
                                 const std::string& dir);

// Writes `dir`/reference/: random inputs for `graph` (every symbolic dim = `symbol_value`, floats
// uniform in [-1, 1), integers in [0, 4)) and the CPU backend's outputs for them, one raw
// little-endian file per tensor, listed in reference/manifest.txt, one line per tensor:
//   input|output <name> <dtype> <ndim> <dims...> <file>
// What the example application (examples/cpp/) checks a model library against.
void write_model_reference(const Graph& graph, const std::string& dir, int64_t symbol_value = 2);

// The function name of a model library's entry point (kiln_main).
inline constexpr const char* kModelFunction = "main";

}  // namespace kiln::package
