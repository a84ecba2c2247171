// kiln quantize model.onnx --format nvfp4|mxfp4|int4 [--group G] [--nodes a,b] -o out.onnx
#include <filesystem>
#include <iostream>

#include "Commands.h"
#include "kiln/onnx/Export.h"
#include "kiln/onnx/Import.h"
#include "kiln/quant/Nvfp4Checkpoint.h"
#include "kiln/quant/PrequantizedOnnx.h"
#include "kiln/quant/QuantizeModel.h"
#include "kiln/support/Error.h"

namespace kiln::cli {

namespace {

struct QuantizeOptions {
  std::string model, output, format = "nvfp4", scale_dtype = "bf16", weights;
  int64_t group = 0;
  std::vector<std::string> nodes;
  int64_t external_threshold_mb = 256;
};

int run_quantize(const QuantizeOptions& o) {
  quant::QuantizeModelOptions options;
  if (o.format == "nvfp4") options.spec.format = quant::QuantFormat::NvFp4;
  else if (o.format == "mxfp4") options.spec.format = quant::QuantFormat::MxFp4;
  else options.spec.format = quant::QuantFormat::Int4;
  options.spec.group = o.group;
  options.spec.scale_dtype = o.scale_dtype == "fp16" ? DType::Float16 : DType::BFloat16;
  options.nodes = o.nodes;
  if (!o.weights.empty()) {
    options.prequantized = quant::read_nvfp4_checkpoint(o.weights);
    std::cout << "read " << options.prequantized.size() << " NVFP4 layers from " << o.weights << "\n";
  }
  options.on_layer = [](const quant::LayerReport& l) {
    std::cout << fmt::format("  {:<40} {:>6} x {:<6} rel.err {:.3e}  max.err {:.3e}\n", l.node, l.n, l.k,
                             l.error.relative_l2, l.error.max_abs)
              << std::flush;
  };
  std::cout << "loading " << o.model << "\n" << std::flush;
  quant::PrequantizedReport pre;
  Graph graph = quant::load_onnx_prequantized(o.model, &pre);
  if (!pre.layers.empty()) {
    std::cout << pre.layers.size() << " layers already in NVFP4 (Model Optimizer's DequantizeLinear of FLOAT4E2M1), kept as stored:\n";
    for (const std::string& l : pre.layers) std::cout << "  " << l << "\n";
  }
  for (const std::string& s : pre.skipped) std::cout << "  FLOAT4E2M1 weight left as is: " << s << "\n";
  std::cout << "quantizing to " << o.format << " (layer, N x K, relative error |W - dq(W)| / |W|, max error):\n";
  quant::QuantizeModelReport report = quant::quantize_model(graph, options);
  if (report.layers.empty() && pre.layers.empty()) {
    user_error("no MatMul or Gemm with a constant weight was found to quantize{}",
               report.skipped.empty() ? "" : " (skipped: " + fmt::format("{}", fmt::join(report.skipped, "; ")) + ")");
  }
  double sum = 0, worst = 0;
  for (const auto& l : report.layers) {
    sum += l.error.relative_l2;
    worst = std::max(worst, l.error.relative_l2);
  }
  std::cout << fmt::format("{} layers quantized; mean relative error {:.3e}, worst {:.3e}; weights {:.1f} MB -> {:.1f} MB\n",
                           report.layers.size(), report.layers.empty() ? 0.0 : sum / static_cast<double>(report.layers.size()), worst,
                           static_cast<double>(report.weight_bytes_before) / 1e6,
                           static_cast<double>(report.weight_bytes_after) / 1e6);
  for (const std::string& s : report.skipped) std::cout << "  left as is: " << s << "\n";
  if (!o.weights.empty()) {
    std::cout << report.from_checkpoint.size() << " layers took their weights from " << o.weights << " as stored\n";
    if (report.from_checkpoint.size() < options.prequantized.size()) {
      std::cout << "  (" << options.prequantized.size() - report.from_checkpoint.size()
                << " checkpoint layers matched no MatMul/Gemm weight initializer of the same name)\n";
    }
  }
  ExportOptions out;
  out.domain_versions["kiln"] = 1;
  int64_t total = 0;
  for (const Value& v : graph.values) total += v.constant ? static_cast<int64_t>(v.constant->num_bytes()) : 0;
  if (total > o.external_threshold_mb * (1 << 20)) {
    out.external_data_file = std::filesystem::path(o.output).filename().string() + ".data";
  }
  save_onnx(graph, o.output, out);
  std::cout << "wrote " << o.output << (out.external_data_file.empty() ? "" : " (+ " + out.external_data_file + ")")
            << "\n";
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Quantize the weights of MatMul/Gemm nodes with constant weights to 4 bits and rewrite each\n"
      "into a kiln.QuantLinear node (y = x * dequant(W)^T + bias). Prints each layer's error.\n"
      "Formats: nvfp4 (E2M1, E4M3 scale per 16, fp32 tensor scale; NVIDIA Model Optimizer's rule),\n"
      "mxfp4 (E2M1, E8M0 scale per 32), int4 (asymmetric, scale and zero per 32/64/128).\n"
      "Weights that are already NVFP4 as NVIDIA Model Optimizer exports them (DequantizeLinear of\n"
      "FLOAT4E2M1 with E4M3 block scales, block_size 16, feeding MatMul/Gemm) are kept as stored.");
  cmd->add_option("model", o->model, "The .onnx file (external data is read from its folder)")->required();
  cmd->add_option("-o,--output", o->output, "The quantized .onnx file to write")->required();
  cmd->add_option("--format", o->format, "nvfp4, mxfp4 or int4")->check(CLI::IsMember({"nvfp4", "mxfp4", "int4"}));
  cmd->add_option("--group", o->group, "int4 group size: 32, 64 or 128 (default 128)");
  cmd->add_option("--scale-dtype", o->scale_dtype, "int4 scale and zero dtype: bf16 or fp16")
      ->check(CLI::IsMember({"bf16", "fp16"}));
  cmd->add_option("--nodes", o->nodes, "Only these nodes (comma-separated names)")->delimiter(',');
  cmd->add_option("--weights", o->weights,
                  "An NVFP4 Hugging Face checkpoint (.safetensors, Model Optimizer or llm-compressor): layers\n"
                  "whose weight initializer is named like a checkpoint weight ('P.weight') take its bytes as stored");
  cmd->add_option("--external-data-above-mb", o->external_threshold_mb,
                  "Write initializers to OUTPUT.data when they total more than this (default 256)");
  cmd->callback([o] { set_exit_code(run_quantize(*o)); });
}

}  // namespace kiln::cli
