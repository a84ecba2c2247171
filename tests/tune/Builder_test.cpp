// The tuner's builder on the CUDA target (nvcc, no GPU needed): a GEMM template call is compiled
// once, as a translation unit of its own, into the object cache, and every candidate (of this
// build and of later ones) links that object; the candidates' own units hold no template
// instantiation.
#include "kiln/tune/Builder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../ops/TestGraph.h"
#include "TuneTestModels.h"
#include "kiln/codegen/Build.h"
#include "kiln/codegen/Codegen.h"

namespace kiln::tune {
namespace {

namespace fs = std::filesystem;

// An fp16 MatMul (a template call) followed by a softmax (a row kernel the knobs change).
Graph matmul_softmax() {
  test::TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {ir::Expr(32), ir::Expr(64)});
  const int w = t.input("w", DType::Float16, {ir::Expr(64), ir::Expr(128)});
  t.output(t.node("probs", OpKind::Softmax, {t.node("mm", OpKind::MatMul, {x, w})}, {{"axis", test::int_attr(-1)}}));
  t.graph.name = "mm_softmax";
  return t.graph;
}

std::vector<fs::path> objects_in(const std::string& dir) {
  std::vector<fs::path> found;
  if (!fs::exists(dir)) return found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".o") found.push_back(e.path());
  }
  return found;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Two contractions: two units, whose functors have different names. The template instantiations a
// functor names are merged by the linker across a library's objects, so two units with one functor
// name would both run one of the two epilogues (seen on an H200: a Gemma layer's output unwritten).
// A candidate's unit holds its generated kernels (launch-bounded by the knobs' block sizes) and
// template kernels (attention, convolutions: their own block sizes). Only the generated ones'
// registers go with the knobs: a template's 151 registers made every ViT candidate with 512 or
// 1024 threads "illegal" (run s30e, 26 of 64).
TEST(Builder, PtxasReportCountsTheGeneratedKernels) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_ZN4kiln4gemm6detail16attention_kernelI6__half23vit_k4_epilogueEEvNS0_7ProblemET0_' for 'sm_90'\n"
      "ptxas info    : Function properties for _ZN4kiln4gemm6detail16attention_kernelI6__half23vit_k4_epilogueEEvNS0_7ProblemET0_\n"
      "    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 151 registers, used 1 barriers, 408 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z9vit_k2_lnPK6__halfPS_' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z9vit_k2_lnPK6__halfPS_\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 368 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z10vit_k7_addPK6__halfPS_' for 'sm_90'\n"
      "ptxas info    : Used 18 registers, used 0 barriers, 368 bytes cmem[0]\n";
  int registers = 0, spill = 0;
  parse_ptxas_report(log, "vit_k", registers, spill);
  EXPECT_EQ(registers, 40);
  EXPECT_EQ(spill, 0);
  parse_ptxas_report(log, "", registers, spill);
  EXPECT_EQ(registers, 151);
  EXPECT_EQ(spill, 8);
  parse_ptxas_report(log, "other_k", registers, spill);
  EXPECT_EQ(registers, -1);
}

// A candidate built in an earlier round (same text, flags and compiler) is not built again: its
// library and compiler log are reused. A candidate whose flags differ is built under its own name.
TEST(Builder, LaterRoundsReuseTheLibraryOfTheSameBuild) {
  const std::string dir = test::temp_dir("builder_reuse");
  const codegen::KernelDefinition kernel = test::only_kernel(test::softmax_graph(4, 64, DType::Float32));
  const SearchSpace space = search_space(kernel, codegen::Target::Cpu);
  BuildRequest request;
  request.target = codegen::Target::Cpu;
  request.arch = "cpu";
  request.work_dir = dir;
  request.jobs = 2;
  Candidate other = space.default_candidate();
  other["opt_level"] = other["opt_level"] == 1 ? 2 : 1;
  BuildTimes first;
  const std::vector<BuiltCandidate> a = build_candidates(kernel, space, {space.default_candidate(), other}, request, &first);
  ASSERT_FALSE(a[0].library.empty()) << a[0].error;
  ASSERT_FALSE(a[1].library.empty()) << a[1].error;
  EXPECT_NE(a[0].library, a[1].library) << "one source, two sets of flags: two libraries";
  EXPECT_EQ(first.candidates, 2);
  EXPECT_EQ(first.reused, 0);
  const auto written = fs::last_write_time(a[0].library);
  BuildTimes second;
  const std::vector<BuiltCandidate> b = build_candidates(kernel, space, {space.default_candidate()}, request, &second);
  EXPECT_EQ(b[0].library, a[0].library);
  EXPECT_EQ(second.candidates, 0);
  EXPECT_EQ(second.reused, 1);
  EXPECT_EQ(fs::last_write_time(b[0].library), written) << "the library was built again";
  fs::remove_all(dir);
}

TEST(Builder, TemplateUnitsNameTheirFunctorsApart) {
  test::TestGraph t(17, false);
  const int x = t.input("x", DType::Float16, {ir::Expr(32), ir::Expr(64)});
  const int w1 = t.input("w1", DType::Float16, {ir::Expr(64), ir::Expr(128)});
  const int w2 = t.input("w2", DType::Float16, {ir::Expr(128), ir::Expr(64)});
  const int h = t.node("relu", OpKind::Relu, {t.node("mm1", OpKind::MatMul, {x, w1})});
  t.output(t.node("mm2", OpKind::MatMul, {h, w2}));
  t.graph.name = "two_mm";
  const codegen::GraphFunction f = codegen::lower_kernel(test::only_kernel(t.graph), codegen::Target::Cuda);
  std::vector<std::string> units;
  codegen::ModuleOptions options;
  options.template_units = &units;
  const std::string module = codegen::generate_module({f.func}, codegen::Target::Cuda, options);
  ASSERT_EQ(units.size(), 2u) << module;
  std::set<std::string> functors;
  for (const std::string& u : units) {
    const size_t at = u.find("struct kiln_unit_epilogue_");
    ASSERT_NE(at, std::string::npos) << u;
    functors.insert(u.substr(at, u.find(' ', at + 7) - at));
    const size_t launcher = u.find("extern \"C\" cudaError_t kiln_gemm_unit_");
    ASSERT_NE(launcher, std::string::npos) << u;
    const std::string name = u.substr(launcher + 23, u.find('(', launcher) - launcher - 23);
    EXPECT_NE(module.find(name + "(&problem, &epilogue, "), std::string::npos) << name << "\n" << module;
  }
  EXPECT_EQ(functors.size(), 2u);
  EXPECT_EQ(module.find("kiln::gemm::gemm_wgmma<"), std::string::npos) << "the module instantiates no template";
}

TEST(Builder, TemplateCallsAreCompiledOnceIntoTheObjectCache) {
  if (codegen::find_nvcc().empty()) GTEST_SKIP() << "nvcc not found: CUDA candidates are not built here";
  const std::string dir = test::temp_dir("builder_units");
  const codegen::KernelDefinition kernel = test::only_kernel(matmul_softmax());
  const SearchSpace space = search_space(kernel, codegen::Target::Cuda);
  Candidate other = space.default_candidate();
  ASSERT_TRUE(other.count("row_threads"));
  other["row_threads"] = 128;
  BuildRequest request;
  request.target = codegen::Target::Cuda;
  request.arch = "sm_90";
  request.work_dir = dir + "/a";
  request.jobs = 2;
  request.object_cache = dir + "/objects";
  const std::vector<BuiltCandidate> built = build_candidates(kernel, space, {space.default_candidate(), other}, request);
  ASSERT_EQ(built.size(), 2u);
  for (const BuiltCandidate& b : built) {
    EXPECT_EQ(b.same_as, -1) << "the two candidates print different row kernels";
    ASSERT_FALSE(b.library.empty()) << b.error;
    // The candidate's own unit calls the template through the unit's launcher.
    const std::string source = text_of(b.library.substr(0, b.library.size() - 3) + ".cu");
    EXPECT_NE(source.find("extern \"C\" cudaError_t kiln_gemm_unit_"), std::string::npos) << source;
    EXPECT_NE(source.find("(&problem, &epilogue, "), std::string::npos) << source;
    EXPECT_EQ(source.find("kiln::gemm::gemm_wgmma<"), std::string::npos) << source;
  }
  const std::vector<fs::path> objects = objects_in(request.object_cache);
  ASSERT_EQ(objects.size(), 1u) << "one GEMM call, compiled once for both candidates";
  const auto written = fs::last_write_time(objects[0]);

  // A later build (another worker's folder, a new candidate) links the cached object.
  Candidate third = space.default_candidate();
  third["row_threads"] = 256;
  request.work_dir = dir + "/b";
  const std::vector<BuiltCandidate> again = build_candidates(kernel, space, {third}, request);
  ASSERT_FALSE(again.at(0).library.empty()) << again.at(0).error;
  ASSERT_EQ(objects_in(request.object_cache).size(), 1u);
  EXPECT_EQ(fs::last_write_time(objects[0]), written) << "the cached object was compiled again";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::tune
