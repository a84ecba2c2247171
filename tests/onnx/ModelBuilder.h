#pragma once
// Builds small ModelProtos in C++ for the frontend tests: no Python, no files checked in.
#include <onnx/onnx-ml.pb.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/onnx/Proto.h"

namespace kiln::testing {

using Dim = std::variant<int64_t, std::string>;  // a size or a dim_param

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  ModelBuilder& input(const std::string& name, int32_t elem_type, const std::vector<Dim>& dims) {
    set_value_info(graph().add_input(), name, elem_type, dims);
    return *this;
  }
  ModelBuilder& output(const std::string& name, int32_t elem_type, const std::vector<Dim>& dims) {
    set_value_info(graph().add_output(), name, elem_type, dims);
    return *this;
  }
  ModelBuilder& value_info(const std::string& name, int32_t elem_type, const std::vector<Dim>& dims) {
    set_value_info(graph().add_value_info(), name, elem_type, dims);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op_type);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  onnx::TensorProto& initializer(const std::string& name, const HostTensor& t) {
    auto* p = graph().add_initializer();
    *p = tensor_to_proto(t, name);
    return *p;
  }

  std::string bytes() const { return model_.SerializeAsString(); }
  void save(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(model_.SerializeToOstream(&out)) << path;
  }

 private:
  static void set_value_info(onnx::ValueInfoProto* vi, const std::string& name, int32_t elem_type,
                             const std::vector<Dim>& dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const Dim& d : dims) {
      auto* dim = shape->add_dim();
      if (const auto* v = std::get_if<int64_t>(&d)) dim->set_dim_value(*v);
      else if (!std::get<std::string>(d).empty()) dim->set_dim_param(std::get<std::string>(d));
    }
  }

  onnx::ModelProto model_;
};

inline void add_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void add_attr(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void add_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A fresh folder under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("kiln_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline HostTensor iota_tensor(DType dtype, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set_double(i, static_cast<double>(i % 7));
  return t;
}

}  // namespace kiln::testing
