// Loads a model library, prints its inputs and outputs, runs it on the reference inputs that
// `kiln compile --reference` wrote next to it and checks the outputs against the CPU backend's
// (reference/manifest.txt), from several threads at once, each with its own Session. Prints the
// memory report and checks the plan: peak <= 1.1 x (weights + largest live set + inputs/outputs).
//
//   run_model [libmodel.so] [--threads N]
// Exit status 0 when every output matches. CPU model libraries only (the GPU run is bench/runtime/).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/Model.h"

namespace {

struct Tensor {
  std::string kind, name, dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

std::vector<Tensor> read_reference(const std::string& folder) {
  std::ifstream manifest(folder + "/manifest.txt");
  std::vector<Tensor> tensors;
  std::string line;
  while (std::getline(manifest, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    Tensor t;
    int ndim = 0;
    std::string file;
    in >> t.kind >> t.name >> t.dtype >> ndim;
    t.shape.resize(ndim);
    for (int64_t& d : t.shape) in >> d;
    in >> file;
    std::ifstream data(folder + "/" + file, std::ios::binary);
    t.bytes.assign(std::istreambuf_iterator<char>(data), {});
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = KILN_EXAMPLE_LIBRARY;
  int threads = 4;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--threads") == 0 && a + 1 < argc) {
      threads = std::atoi(argv[++a]);
    } else {
      path = argv[a];
    }
  }
  kiln::Model model = kiln::Model::load(path);
  if (!model) {
    std::cerr << "error: " << model.error() << "\n";
    return 1;
  }
  std::cout << "model " << model.name() << ": " << model.signature() << "\n";
  for (const kiln::TensorInfo& t : model.inputs()) std::cout << "  input  " << t.describe() << "\n";
  for (const kiln::TensorInfo& t : model.outputs()) std::cout << "  output " << t.describe() << "\n";
  if (model.device_type() != kDLCPU) {
    std::cerr << "this example checks CPU model libraries (compile with TARGETS cpu)\n";
    return 1;
  }

  const std::string folder = path.substr(0, path.rfind('/')) + "/reference";
  std::vector<Tensor> reference = read_reference(folder);
  std::vector<DLTensor> inputs;
  std::vector<const Tensor*> expected;
  for (Tensor& t : reference) {
    if (t.kind == "input") inputs.push_back(kiln::tensor_view(t.bytes.data(), t.shape, model.inputs()[inputs.size()].dtype));
    if (t.kind == "output") expected.push_back(&t);
  }
  if (inputs.size() != model.inputs().size() || expected.size() != model.outputs().size() || expected.empty()) {
    std::cerr << "error: " << folder << "/manifest.txt does not match the model (rebuild with kiln compile --reference)\n";
    return 1;
  }

  // Each thread: its own Session and outputs, the same Model and inputs.
  std::vector<std::string> failures(threads);
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k) {
    pool.emplace_back([&, k] {
      kiln::Session session = model.new_session();
      std::vector<std::vector<char>> storage;
      std::vector<DLTensor> outputs;
      for (const Tensor* e : expected) storage.emplace_back(e->bytes.size(), 0x7f);  // poisoned
      for (size_t o = 0; o < expected.size(); ++o) {
        outputs.push_back(kiln::tensor_view(storage[o].data(), expected[o]->shape, model.outputs()[o].dtype));
      }
      for (int repeat = 0; repeat < 3; ++repeat) {
        kiln::Status s = session.run(inputs, outputs);
        if (!s) {
          failures[k] = s.message();
          return;
        }
      }
      for (size_t o = 0; o < expected.size(); ++o) {
        if (expected[o]->dtype != "float32") {
          if (storage[o] != expected[o]->bytes) failures[k] = expected[o]->name + " differs";
          continue;
        }
        const float* got = reinterpret_cast<const float*>(storage[o].data());
        const float* want = reinterpret_cast<const float*>(expected[o]->bytes.data());
        for (size_t i = 0; i < storage[o].size() / 4; ++i) {
          if (!(std::fabs(got[i] - want[i]) <= 1e-4f + 1e-4f * std::fabs(want[i]))) {
            failures[k] = expected[o]->name + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                          ", the CPU backend gives " + std::to_string(want[i]);
            return;
          }
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  int failed = 0;
  for (int k = 0; k < threads; ++k) {
    if (!failures[k].empty()) {
      std::cerr << "thread " << k << ": " << failures[k] << "\n";
      ++failed;
    }
  }

  std::vector<DLTensor> outputs;
  for (size_t o = 0; o < expected.size(); ++o) {
    outputs.push_back(kiln::tensor_view(nullptr, expected[o]->shape, model.outputs()[o].dtype));
  }
  kiln::MemoryReport memory;
  kiln::Status s = model.memory(inputs, outputs, &memory);
  if (!s) {
    std::cerr << "memory: " << s.message() << "\n";
    return 1;
  }
  const double bound = 1.1 * static_cast<double>(memory.weights + memory.live + memory.io);
  std::cout << "memory: weights " << memory.weights << " B, arena " << memory.arena << " B (largest live set "
            << memory.live << " B), inputs+outputs " << memory.io << " B, peak " << memory.peak() << " B <= 1.1 x "
            << (memory.weights + memory.live + memory.io) << ": " << (memory.peak() <= bound ? "yes" : "NO") << "\n";
  if (memory.peak() > bound) ++failed;
  std::cout << (failed ? "FAILED" : "OK") << ": " << threads << " thread(s), outputs "
            << (failed ? "differ from" : "match") << " the CPU backend's\n";
  return failed ? 1 : 0;
}
