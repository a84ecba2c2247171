// The model runtime on the GPU (issue 10): a CUDA model library (the Gemma MLP block at M=1,
// exported by export_gemma_mlp.py, compiled with kiln compile --model --target sm_90) run through
// kiln::Model / kiln::Session, checked against PyTorch eager's output with the output poisoned
// before each checked run, then timed: plain runs (entry point + one launch per kernel) and
// CUDA-graph replays, and 4 threads each with its own Session and stream replaying at once.
// The sum of the kernels' times comes from ncu (run with --once under ncu; device_run.sh).
// Input and reference files hold the model's dtype (float32 or float16), raw.
//   bench_runtime LIB X_BIN Y_REF_BIN [--once]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/Model.h"

#define CHECK_CUDA(x)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

static std::vector<char> read_bytes(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), {});
}

// Elements of `dtype` (float32 or float16) as floats.
static std::vector<float> as_floats(const std::vector<char>& bytes, DLDataType dtype) {
  std::vector<float> f(bytes.size() / (dtype.bits / 8));
  for (size_t i = 0; i < f.size(); ++i) {
    if (dtype.bits == 16) {
      __half h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      f[i] = __half2float(h);
    } else {
      std::memcpy(&f[i], bytes.data() + 4 * i, 4);
    }
  }
  return f;
}

static double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0, scale = 1e-6;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::isfinite(got[i]) ? std::fabs(got[i] - want[i]) / scale : INFINITY;
    worst = std::max(worst, e);
  }
  return worst;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const bool once = argc > 4 && std::strcmp(argv[4], "--once") == 0;
  kiln::Model model = kiln::Model::load(argv[1]);
  if (!model) {
    std::fprintf(stderr, "load: %s\n", model.error().c_str());
    return 1;
  }
  const kiln::TensorInfo& in = model.inputs()[0];
  const DLDataType dt = in.dtype;
  if (dt.code != kDLFloat || (dt.bits != 32 && dt.bits != 16)) {
    std::fprintf(stderr, "the model's input is not float32 or float16\n");
    return 1;
  }
  const std::vector<char> x = read_bytes(argv[2]);
  const std::vector<float> y_ref = as_floats(read_bytes(argv[3]), dt);
  const size_t x_bytes = x.size(), y_bytes = y_ref.size() * (dt.bits / 8);
  // float16 rounds each stored activation: the reference is float32 math on the same input.
  const double tolerance = dt.bits == 16 ? 2e-2 : 1e-3;
  std::vector<int64_t> xs = in.dims, ys = model.outputs()[0].dims;
  void *dx, *dy;
  CHECK_CUDA(cudaMalloc(&dx, x_bytes));
  CHECK_CUDA(cudaMalloc(&dy, y_bytes));
  CHECK_CUDA(cudaMemcpy(dx, x.data(), x_bytes, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const DLTensor tx = kiln::tensor_view(dx, xs, dt, {kDLCUDA, 0}), ty = kiln::tensor_view(dy, ys, dt, {kDLCUDA, 0});
  kiln::Session session = model.new_session();
  if (once) {  // under ncu: one plain run
    kiln::Status s = session.run({tx}, {ty}, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return s ? 0 : 1;
  }
  std::printf("model %s: %s\n", model.name().c_str(), model.signature().c_str());

  auto check = [&](const char* what, kiln::RunOptions options) {
    CHECK_CUDA(cudaMemset(dy, 0xff, y_bytes));  // NaN
    kiln::Status s = session.run({tx}, {ty}, stream, options);
    if (!s) {
      std::printf("%s: %s\n", what, s.message().c_str());
      std::exit(1);
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<char> y(y_bytes);
    CHECK_CUDA(cudaMemcpy(y.data(), dy, y_bytes, cudaMemcpyDeviceToHost));
    const double err = max_rel_err(as_floats(y, dt), y_ref);
    std::printf("check %-12s max |kiln - torch eager| / max|torch| = %.2e %s\n", what, err,
                err < tolerance ? "OK" : "FAIL");
    if (!(err < tolerance)) std::exit(1);
  };
  kiln::RunOptions graph;
  graph.cuda_graph = true;
  check("plain run", {});
  check("graph", graph);   // captures
  check("graph replay", graph);

  auto time_runs = [&](kiln::RunOptions options, int iters) {
    for (int i = 0; i < 20; ++i) (void)session.run({tx}, {ty}, stream, options);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, stream);
    for (int i = 0; i < iters; ++i) (void)session.run({tx}, {ty}, stream, options);
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms * 1e3 / iters;
  };
  const double plain_us = time_runs({}, 200), replay_us = time_runs(graph, 1000);
  // Host time of one replay call (enqueue cost), GPU kept busy.
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 500; ++i) (void)session.run({tx}, {ty}, stream, graph);
  auto t1 = std::chrono::steady_clock::now();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / 500;

  // Threads: each its own Session, stream, input and output; graph replay; results checked.
  const int threads = 4, iters = 100;
  std::vector<std::string> failures(threads);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      kiln::Session s = model.new_session();
      cudaStream_t st;
      void *px, *py;
      cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
      cudaMalloc(&px, x_bytes);
      cudaMalloc(&py, y_bytes);
      cudaMemcpy(px, x.data(), x_bytes, cudaMemcpyHostToDevice);
      cudaMemset(py, 0xff, y_bytes);
      const DLTensor a = kiln::tensor_view(px, xs, dt, {kDLCUDA, 0}), b = kiln::tensor_view(py, ys, dt, {kDLCUDA, 0});
      for (int i = 0; i < iters; ++i) {
        kiln::Status status = s.run({a}, {b}, st, graph);
        if (!status) failures[t] = status.message();
      }
      cudaStreamSynchronize(st);
      std::vector<char> y(y_bytes);
      cudaMemcpy(y.data(), py, y_bytes, cudaMemcpyDeviceToHost);
      if (!(max_rel_err(as_floats(y, dt), y_ref) < tolerance)) failures[t] += " wrong result";
      if (s.graphs_captured() != 1 || s.graph_replays() != iters - 1) failures[t] += " graphs not reused";
      cudaFree(px);
      cudaFree(py);
      cudaStreamDestroy(st);
    });
  }
  for (std::thread& t : pool) t.join();
  const double threads_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  int failed = 0;
  for (int t = 0; t < threads; ++t) {
    if (!failures[t].empty()) {
      std::printf("thread %d: %s\n", t, failures[t].c_str());
      ++failed;
    }
  }
  kiln::MemoryReport m;
  (void)model.memory({tx}, {ty}, &m);
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  std::printf("RESULT {\"plain_run_us\": %.2f, \"graph_replay_us\": %.2f, \"replay_host_enqueue_us\": %.2f, "
              "\"threads\": %d, \"runs_per_thread\": %d, \"threads_wall_ms\": %.1f, \"threads_ok\": %s, "
              "\"weights_bytes\": %llu, \"arena_bytes\": %llu, \"live_bytes\": %llu, \"io_bytes\": %llu}\n",
              plain_us, replay_us, host_us, threads, iters, threads_ms, failed ? "false" : "true",
              (unsigned long long)m.weights, (unsigned long long)m.arena, (unsigned long long)m.live,
              (unsigned long long)m.io);
  return failed ? 1 : 0;
}
