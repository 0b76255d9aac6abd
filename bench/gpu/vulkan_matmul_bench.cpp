// hearth-bench-vulkan-matmul: the matvec shaders' speed (Q8_0, Q4_0, F16, Q4_K, Q6_K) as GB/s of weights read, for a
// real GPU (lavapipe runs it too, slowly). Each run first checks one product bitwise against matmul_reference, then
// times `--iters` dispatches recorded in one command batch (so submit overhead is amortized, as an engine step would).
//   build/bench/gpu/hearth-bench-vulkan-matmul [--device 0] [--rows 4096] [--cols 4096] [--tokens 1] [--iters 50]

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "gpu/ops.h"
#include "gpu/pipeline.h"
#include "kernels/matmul.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

struct Flags {
  int device = 0;
  int64_t rows = 4096;
  int64_t cols = 4096;
  int64_t tokens = 1;
  int iters = 50;
  std::vector<std::string> types{"q8_0", "q4_0", "f16", "q4_k", "q6_k"};
};

std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const size_t stride = row_bytes(type, cols);
  std::vector<uint8_t> w(stride * rows);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    if (type == DType::F16) {
      for (int64_t c = 0; c < cols; ++c) {
        const uint16_t h = fp32_to_fp16(row[c]);
        std::memcpy(w.data() + r * stride + 2 * c, &h, 2);
      }
    } else {
      quantize_row(type, row.data(), w.data() + r * stride, cols);
    }
  }
  return w;
}

// Returns 0 when the shader ran and matched the reference, 1 otherwise (the message on stderr).
int bench_type(gpu::Context& ctx, const gpu::Kernels& kernels, gpu::CommandRecorder& rec, DType type, const Flags& f) {
  const std::vector<uint8_t> w = random_weights(type, f.rows, f.cols);
  std::vector<float> x(f.cols * f.tokens);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  std::vector<uint8_t> act;
  gpu::prepare_activations(type, x.data(), f.tokens, f.cols, act);
  auto wb = ctx.create_buffer(w.size(), gpu::MemoryKind::kDeviceLocal);
  auto xb = ctx.create_buffer(act.size(), gpu::MemoryKind::kDeviceLocal);
  auto yb = ctx.create_buffer(f.rows * f.tokens * sizeof(float), gpu::MemoryKind::kDeviceLocal);
  for (auto* b : {&wb, &xb, &yb}) {
    if (!*b) return std::fprintf(stderr, "%s\n", b->error().message.c_str()), 1;
  }
  if (!wb->upload(w.data(), w.size()).ok() || !xb->upload(act.data(), act.size()).ok()) {
    return std::fprintf(stderr, "upload failed\n"), 1;
  }
  const size_t row = row_bytes(type, f.cols);
  auto run = [&](int n) -> Result<void> {
    HEARTH_TRY(rec.begin());
    for (int i = 0; i < n; ++i) HEARTH_TRY(kernels.matmul(rec, type, *wb, f.rows, f.cols, row, *xb, f.tokens, *yb));
    return rec.run();
  };
  if (auto r = run(1); !r) return std::fprintf(stderr, "%s\n", r.error().message.c_str()), 1;
  std::vector<float> got(f.rows * f.tokens);
  std::vector<float> want(got.size());
  if (!yb->download(got.data(), got.size() * sizeof(float)).ok()) return std::fprintf(stderr, "download failed\n"), 1;
  matmul_reference(MatrixView{type, f.rows, f.cols, w.data(), row, nullptr}, x.data(), f.tokens, want.data());
  const bool bitwise = std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;

  const auto start = std::chrono::steady_clock::now();
  if (auto r = run(f.iters); !r) return std::fprintf(stderr, "%s\n", r.error().message.c_str()), 1;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / f.iters;
  std::printf("%-5s %6lld x %-6lld t=%-3lld %9.1f us  %8.2f GB/s of weights  bitwise=%s\n",
              std::string(dtype_name(type)).c_str(), static_cast<long long>(f.rows), static_cast<long long>(f.cols),
              static_cast<long long>(f.tokens), seconds * 1e6, static_cast<double>(w.size()) / seconds / 1e9,
              bitwise ? "yes" : "NO");
  return bitwise ? 0 : 1;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  using namespace hearth;
  Flags f;
  CLI::App app{"Vulkan matvec shaders: GB/s of weights read"};
  app.add_option("--device", f.device, "Vulkan device index (hearth devices)");
  app.add_option("--rows", f.rows, "weight rows (outputs)");
  app.add_option("--cols", f.cols, "weight columns (a multiple of 256)");
  app.add_option("--tokens", f.tokens, "activation rows");
  app.add_option("--iters", f.iters, "timed dispatches, one batch (at most 256)")->check(CLI::Range(1, 256));
  app.add_option("--types", f.types, "weight types: q8_0 q4_0 f16 q4_k q6_k f32 bf16");
  CLI11_PARSE(app, argc, argv);
  if (f.cols % 256 != 0) return std::fprintf(stderr, "--cols must be a multiple of 256\n"), 2;
  auto ctx = gpu::Context::create(f.device);
  if (!ctx) return std::fprintf(stderr, "%s\n", ctx.error().message.c_str()), 1;
  auto kernels = gpu::Kernels::create(**ctx);
  if (!kernels) return std::fprintf(stderr, "%s\n", kernels.error().message.c_str()), 1;
  auto rec = gpu::CommandRecorder::create(**ctx);
  if (!rec) return std::fprintf(stderr, "%s\n", rec.error().message.c_str()), 1;
  std::printf("device %d: %s (%s)\n", f.device, (*ctx)->info().name.c_str(),
              gpu::device_type_name((*ctx)->info().type));
  int failures = 0;
  for (const std::string& name : f.types) {
    const DType type = name == "q8_0"   ? DType::Q8_0
                       : name == "q4_0" ? DType::Q4_0
                       : name == "f16"  ? DType::F16
                       : name == "q4_k" ? DType::Q4_K
                       : name == "q6_k" ? DType::Q6_K
                       : name == "f32"  ? DType::F32
                       : name == "bf16" ? DType::BF16
                                        : DType::Q2_K;  // no shader: reported below
    if (!gpu::matmul_supported(type)) {
      std::fprintf(stderr, "no GPU matmul for %s\n", name.c_str());
      ++failures;
      continue;
    }
    failures += bench_type(**ctx, **kernels, **rec, type, f);
  }
  return failures == 0 ? 0 : 1;
}
