// kiln plugins: selection errors, atomic output, the rewritten model (onnx checker, CPU semantics
// of plugin nodes), the package's files. No nvcc/TensorRT needed (build = false); the build and
// the IPluginV3 checks run in tests/package/run_harness.sh.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/onnx/Export.h"
#include "kiln/onnx/Import.h"
#include "kiln/package/PluginNodes.h"
#include "kiln/package/Plugins.h"
#include "kiln/quant/QuantizeModel.h"
#include "kiln/runtime/GraphRunner.h"
#include "kiln/support/Error.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const std::string kMlp = std::string(KILN_SOURCE_DIR) + "/examples/gemma_mlp.onnx";
const std::string kCnn = std::string(KILN_SOURCE_DIR) + "/examples/small_cnn.onnx";

std::string out_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("kiln_plugins_test_" + name);
  fs::remove_all(p);
  return p.string();
}

package::PluginOptions no_build() {
  package::PluginOptions o;
  o.build = false;
  return o;
}

std::string error_of(const std::string& model, const std::string& dir, const package::PluginOptions& o) {
  try {
    package::make_plugins(model, dir, o);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

HostTensor random_tensor(std::vector<int64_t> shape, unsigned seed) {
  HostTensor t(DType::Float32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_double(i, u(rng));
  return t;
}

// The rewritten model computes what the original does, on the CPU backend.
void expect_same_on_cpu(const std::string& original, const std::string& rewritten, const std::string& input,
                        const std::vector<int64_t>& shape) {
  const Graph a = load_onnx(original);
  const Graph b = package::load_plugin_model(rewritten);
  const std::map<std::string, HostTensor> inputs = {{input, random_tensor(shape, 7)}};
  const std::vector<HostTensor> ya = run_graph_on_cpu(a, inputs), yb = run_graph_on_cpu(b, inputs);
  ASSERT_EQ(ya.size(), yb.size());
  for (size_t o = 0; o < ya.size(); ++o) {
    ASSERT_EQ(ya[o].shape(), yb[o].shape()) << "output " << o;
    for (int64_t i = 0; i < ya[o].num_elements(); ++i) {
      ASSERT_NEAR(ya[o].get_double(i), yb[o].get_double(i), 1e-5) << "output " << o << " element " << i;
    }
  }
}

bool onnx_checker_accepts(const std::string& path) {
  const std::string cmd = "python3 -c \"import onnx; onnx.checker.check_model(onnx.load('" + path + "'))\"";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST(Plugins, UnknownNodeIsAUserErrorListingTheNodes) {
  package::PluginOptions o = no_build();
  o.nodes = {"no_such_node"};
  const std::string dir = out_dir("unknown");
  const std::string e = error_of(kMlp, dir, o);
  EXPECT_NE(e.find("no node named 'no_such_node'"), std::string::npos) << e;
  EXPECT_NE(e.find("'gate_proj'"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(Plugins, UnknownOpTypeAndEmptySelection) {
  package::PluginOptions o = no_build();
  o.op_types = {"Loop"};
  EXPECT_NE(error_of(kMlp, out_dir("op"), o).find("no node of op type 'Loop'"), std::string::npos);
  EXPECT_NE(error_of(kMlp, out_dir("none"), no_build()).find("no nodes selected"), std::string::npos);
}

TEST(Plugins, BadDtypesAndTargets) {
  EXPECT_THROW(package::parse_plugin_dtypes("fp32,int4"), UserError);
  EXPECT_EQ(package::parse_plugin_dtypes("fp16,bfloat16").size(), 2u);
  EXPECT_EQ(package::parse_plugin_archs("sm_90,110"), (std::vector<int>{90, 110}));
  EXPECT_THROW(package::parse_plugin_archs("gfx90a"), UserError);
}

TEST(Plugins, MissingTensorRtIsAClearErrorBeforeAnyOutput) {
  package::PluginOptions o;
  o.nodes = {"softmax"};
  o.tensorrt_root = "/nonexistent/tensorrt";
  o.nvcc = "/bin/true";  // found; TensorRT is what is missing
  const std::string dir = out_dir("no_trt");
  const std::string e = error_of(kMlp, dir, o);
  EXPECT_NE(e.find("TensorRT headers not found"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(Plugins, MlpPackagesAndRewrittenModel) {
  package::PluginOptions o = no_build();
  o.nodes = {"input_layernorm", "softmax"};
  o.op_types = {"MatMul"};
  const std::string dir = out_dir("mlp");
  const package::PluginsResult r = package::make_plugins(kMlp, dir, o);
  ASSERT_EQ(r.plugins.size(), 5u);
  EXPECT_EQ(r.plugins[0].name, "kiln_input_layernorm");
  EXPECT_EQ(r.plugins[0].dtypes, (std::vector<std::string>{"fp32", "fp16", "bf16"}));
  EXPECT_EQ(r.plugins[0].fields[0], "axis: INT32 [-1]");
  for (const char* f : {"report.md", "report.json", "CMakeLists.txt", "common/kiln_trt_plugin.cpp", "kiln_softmax/CMakeLists.txt",
                        "kiln_softmax/kiln_softmax_kernels.cu", "kiln_softmax/kiln_softmax_plugin.cpp",
                        "kiln_softmax/test_kiln_softmax.cpp", "kiln_softmax/README.md", "kiln_softmax/testdata/case_bf16.txt"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  }
  EXPECT_TRUE(onnx_checker_accepts(r.rewritten_model));
  const Graph rewritten = load_onnx(r.rewritten_model);  // plugin nodes import as unsupported ops
  int plugin_nodes = 0;
  for (const Node& n : rewritten.nodes) plugin_nodes += n.domain == package::kPluginDomain;
  EXPECT_EQ(plugin_nodes, 5);
  expect_same_on_cpu(kMlp, r.rewritten_model, "x", {2, 3, 64});
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `kiln plugins --op-types QuantLinear` on the example MLP after `kiln quantize --format nvfp4`:
// the float16 package of the down projection (K = 256, N = 64) calls the 4-bit kernels of
// kernels/quant/ with the tensor scale it gets as float16 applied by the epilogue; gate and up
// (K = 64) keep the generated path and say why; the rewritten model still computes the same.
TEST(Plugins, QuantLinearPackagesCallThe4BitKernels) {
  Graph g = load_onnx(kMlp);
  quant::QuantizeModelOptions q;
  q.spec.format = quant::QuantFormat::NvFp4;
  quant::quantize_model(g, q);
  const std::string model = (fs::temp_directory_path() / "kiln_plugins_test_mlp_nvfp4.onnx").string();
  save_onnx(g, model);
  package::PluginOptions o = no_build();
  o.op_types = {"QuantLinear"};
  o.dtypes = {DType::Float16};
  const std::string dir = out_dir("quant");
  const package::PluginsResult r = package::make_plugins(model, dir, o);
  ASSERT_EQ(r.plugins.size(), 3u);
  for (const package::PluginSummary& p : r.plugins) {
    const std::string kernels = read_text(dir + "/" + p.kernel_sources.at(0));
    if (p.name == "kiln_down_proj") {
      EXPECT_NE(kernels.find("launch_linear_epilogue<kiln::quant::gpu::Format::NvFp4, __half>"), std::string::npos) << kernels;
      EXPECT_NE(kernels.find("params.scale2 = nullptr"), std::string::npos);
    } else {
      EXPECT_EQ(kernels.find("launch_linear_epilogue"), std::string::npos) << p.name;
      EXPECT_NE(kernels.find("the 4-bit kernels need N a multiple of 16 and K of 128"), std::string::npos) << p.name;
    }
  }
  expect_same_on_cpu(model, r.rewritten_model, "x", {1, 3, 64});
}

TEST(Plugins, FusedGroupBecomesOneNode) {
  package::PluginOptions o = no_build();
  o.nodes = {"gelu_cube", "gelu_scale_cube", "gelu_inner", "gelu_scale_inner", "gelu_tanh",
             "gelu_one_plus", "gelu_mul", "gelu_half", "gate_times_up"};
  o.fuse = true;
  const std::string dir = out_dir("fused");
  const package::PluginsResult r = package::make_plugins(kMlp, dir, o);
  ASSERT_EQ(r.plugins.size(), 1u);
  EXPECT_EQ(r.plugins[0].replaced_nodes.size(), 9u);
  EXPECT_EQ(r.plugins[0].outputs, (std::vector<std::string>{"act"}));
  EXPECT_TRUE(onnx_checker_accepts(r.rewritten_model));
  expect_same_on_cpu(kMlp, r.rewritten_model, "x", {1, 5, 64});
}

TEST(Plugins, NonConvexFusedGroupIsRejected) {
  package::PluginOptions o = no_build();
  o.nodes = {"gate_proj", "gelu_half"};  // connected only through the unselected GELU chain
  o.fuse = true;
  // Not connected: two plugins, not an error. Selecting both ends of a path but not its middle:
  o.nodes = {"gate_proj", "gelu_cube", "gelu_mul"};
  const std::string e = error_of(kMlp, out_dir("convex"), o);
  EXPECT_NE(e.find("is not convex"), std::string::npos) << e;
}

TEST(Plugins, CnnRewrittenModelRunsOnCpu) {
  package::PluginOptions o = no_build();
  o.nodes = {"conv1", "bn1", "relu1"};
  o.fuse = true;
  const std::string dir = out_dir("cnn");
  const package::PluginsResult r = package::make_plugins(kCnn, dir, o);
  ASSERT_EQ(r.plugins.size(), 1u);
  EXPECT_TRUE(onnx_checker_accepts(r.rewritten_model));
  expect_same_on_cpu(kCnn, r.rewritten_model, "image", {1, 3, 32, 32});
}
