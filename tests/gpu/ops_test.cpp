// Every shader against its CPU twin on odd shapes (rows and lengths that are no multiple of the workgroup of 64,
// one token and several), asserting bitwise equality.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gpu/ops.h"
#include "gpu_env.h"
#include "kernels/attention.h"
#include "kernels/dot_lanes.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

namespace hearth::gpu {
namespace {

using testing::gpu_env;

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

Buffer device_buffer(const void* data, size_t bytes) {
  auto b = gpu_env().ctx->create_buffer(bytes, MemoryKind::kDeviceLocal);
  HEARTH_CHECK(b.ok(), "{}", b.error().message);
  if (data != nullptr) HEARTH_CHECK(b->upload(data, bytes).ok(), "upload");
  return std::move(*b);
}

void run_recorded(const std::function<Result<void>(CommandRecorder&)>& record) {
  CommandRecorder& rec = *gpu_env().rec;
  ASSERT_TRUE(rec.begin().ok());
  auto recorded = record(rec);
  ASSERT_TRUE(recorded.ok()) << recorded.error().message;
  auto ran = rec.run();
  ASSERT_TRUE(ran.ok()) << ran.error().message;
}

std::vector<float> download_floats(const Buffer& b, size_t n) {
  std::vector<float> out(n);
  HEARTH_CHECK(b.download(out.data(), n * sizeof(float)).ok(), "download");
  return out;
}

// Weights of `type` [n_rows, n_cols], each row quantized from random floats (F16: rounded to half).
std::vector<uint8_t> random_weights(DType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  const size_t row = row_bytes(type, n_cols);
  std::vector<uint8_t> w(row * n_rows);
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> f = random_floats(n_cols, seed + static_cast<uint32_t>(r));
    if (type == DType::F16) {
      for (int64_t c = 0; c < n_cols; ++c) {
        const uint16_t h = fp32_to_fp16(f[c]);
        std::memcpy(w.data() + r * row + 2 * c, &h, 2);
      }
    } else {
      quantize_row(type, f.data(), w.data() + r * row, n_cols);
    }
  }
  return w;
}

struct MatmulCase {
  DType type;
  int64_t n_rows, n_cols, n_tokens;
};

class GpuMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(GpuMatmul, BitwiseEqualsMatmulReference) {
  HEARTH_REQUIRE_GPU();
  const MatmulCase c = GetParam();
  const std::vector<uint8_t> w = random_weights(c.type, c.n_rows, c.n_cols, 11);
  const std::vector<float> x = random_floats(c.n_cols * c.n_tokens, 99, -3.0f, 3.0f);
  const size_t row = row_bytes(c.type, c.n_cols);

  std::vector<float> want(c.n_rows * c.n_tokens);
  const MatrixView view{c.type, c.n_rows, c.n_cols, w.data(), row, nullptr};
  matmul_reference(view, x.data(), c.n_tokens, want.data());

  std::vector<uint8_t> act;
  prepare_activations(c.type, x.data(), c.n_tokens, c.n_cols, act);
  Buffer wb = device_buffer(w.data(), w.size());
  Buffer xb = device_buffer(act.data(), act.size());
  Buffer yb = device_buffer(nullptr, want.size() * sizeof(float));
  run_recorded([&](CommandRecorder& rec) {
    return gpu_env().kernels->matmul(rec, c.type, wb, c.n_rows, c.n_cols, row, xb, c.n_tokens, yb);
  });
  const std::vector<float> got = download_floats(yb, want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(want[i], got[i]) << "output " << i;
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
}

std::vector<MatmulCase> matmul_cases() {
  std::vector<MatmulCase> cases;
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::F16}) {
    cases.push_back({type, 1, 32, 1});
    cases.push_back({type, 67, 96, 1});
    cases.push_back({type, 130, 256, 3});
    cases.push_back({type, 65, 544, 5});
  }
  for (DType type : {DType::F32, DType::BF16}) {  // no blocks: any width
    cases.push_back({type, 1, 1, 1});
    cases.push_back({type, 67, 33, 1});
    cases.push_back({type, 130, 101, 3});
  }
  for (DType type : {DType::Q4_K, DType::Q6_K}) {  // 256-element super-blocks
    cases.push_back({type, 1, 256, 1});
    cases.push_back({type, 67, 512, 1});
    cases.push_back({type, 65, 768, 4});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuMatmul, ::testing::ValuesIn(matmul_cases()),
                         [](const ::testing::TestParamInfo<MatmulCase>& info) {
                           const MatmulCase& c = info.param;
                           return std::string(dtype_name(c.type)) + "_" + std::to_string(c.n_rows) + "x" +
                                  std::to_string(c.n_cols) + "_t" + std::to_string(c.n_tokens);
                         });

TEST(GpuOps, RmsNormBitwiseEqualsCpu) {
  HEARTH_REQUIRE_GPU();
  if (!gpu_env().ctx->info().has_float64) GTEST_SKIP() << "the device has no shaderFloat64";
  for (int64_t n : {1, 7, 8, 13, 100, 1000, 2053}) {
    const int64_t n_rows = 3;
    const std::vector<float> x = random_floats(n * n_rows, 5 + static_cast<uint32_t>(n), -4.0f, 4.0f);
    const std::vector<float> w = random_floats(n, 17, 0.5f, 1.5f);
    const float eps = 1e-5f;
    std::vector<float> want(x.size());
    for (int64_t r = 0; r < n_rows; ++r) rms_norm(x.data() + r * n, w.data(), want.data() + r * n, n, eps);
    Buffer xb = device_buffer(x.data(), x.size() * sizeof(float));
    Buffer wb = device_buffer(w.data(), w.size() * sizeof(float));
    Buffer yb = device_buffer(nullptr, want.size() * sizeof(float));
    run_recorded([&](CommandRecorder& rec) { return gpu_env().kernels->rms_norm(rec, xb, wb, yb, n_rows, n, eps); });
    const std::vector<float> got = download_floats(yb, want.size());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << "n " << n;
  }
}

TEST(GpuOps, SiluMulBitwiseEqualsCpu) {
  HEARTH_REQUIRE_GPU();
  if (!gpu_env().ctx->info().has_float64) GTEST_SKIP() << "the device has no shaderFloat64";
  // The last length spans the clamps of exp's argument (|gate| > 87).
  for (int64_t n : {1, 63, 1001, 4099, 2000}) {
    const float range = n == 2000 ? 100.0f : 12.0f;
    const std::vector<float> gate = random_floats(n, 3 + static_cast<uint32_t>(n), -range, range);
    const std::vector<float> up = random_floats(n, 4, -2.0f, 2.0f);
    std::vector<float> want(n);
    silu_mul(gate.data(), up.data(), want.data(), n);
    Buffer gb = device_buffer(gate.data(), n * sizeof(float));
    Buffer ub = device_buffer(up.data(), n * sizeof(float));
    Buffer ob = device_buffer(nullptr, n * sizeof(float));
    run_recorded([&](CommandRecorder& rec) { return gpu_env().kernels->silu_mul(rec, gb, ub, ob, n); });
    const std::vector<float> got = download_floats(ob, n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(want[i], got[i]) << std::hexfloat << "n " << n << " i " << i << " gate " << gate[i] << " up " << up[i]
                                 << " want " << want[i] << " got " << got[i];
    }
  }
}

TEST(GpuOps, RopeBitwiseEqualsCpuBothStyles) {
  HEARTH_REQUIRE_GPU();
  const int64_t n_heads = 5, head_dim = 12, row_stride = n_heads * head_dim + 4;  // padded rows
  const int32_t positions[] = {0, 7, 1000};
  const int64_t n_tokens = 3;
  for (int32_t rope_dim : {12, 8}) {  // full and partial rotation
    for (bool neox : {false, true}) {
      std::vector<float> x = random_floats(n_tokens * row_stride, 21, -2.0f, 2.0f);
      std::vector<float> cos_sin(n_tokens * rope_dim);
      for (int64_t t = 0; t < n_tokens; ++t)
        rope_fill_cos_sin(positions[t], rope_dim, 10000.0f, &cos_sin[t * rope_dim]);
      Buffer xb = device_buffer(x.data(), x.size() * sizeof(float));
      Buffer cb = device_buffer(cos_sin.data(), cos_sin.size() * sizeof(float));
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_heads; ++h)
          rope_apply(&x[t * row_stride + h * head_dim], &cos_sin[t * rope_dim], rope_dim, neox);
      }
      run_recorded([&](CommandRecorder& rec) {
        return gpu_env().kernels->rope(rec, xb, cb, n_tokens, n_heads, head_dim, rope_dim, row_stride, neox);
      });
      const std::vector<float> got = download_floats(xb, x.size());
      ASSERT_EQ(std::memcmp(x.data(), got.data(), x.size() * sizeof(float)), 0)
          << "rope_dim " << rope_dim << " neox " << neox;
    }
  }
}

// The CPU side: attention's softmax step from a fresh state (softmax_step_scalar with m = -inf, l = 0): the row
// max, attention_exp of s - m, and the exps summed in dot_lanes' order.
float softmax_step_twin(const float* s, int64_t n, float* p) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  std::vector<float> shifted(n);
  for (int64_t j = 0; j < n; ++j) shifted[j] = s[j] - m;
  attention_exp(shifted.data(), p, n);
  float lanes[8] = {};
  const int64_t n8 = n - n % 8;
  for (int64_t j = 0; j < n8; j += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += p[j + k];
  }
  float sum = kernels::combine_lanes(lanes);
  for (int64_t j = n8; j < n; ++j) sum += p[j];
  return sum;
}

TEST(GpuOps, SoftmaxBitwiseEqualsAttentionsStep) {
  HEARTH_REQUIRE_GPU();
  if (!gpu_env().ctx->info().has_float64) GTEST_SKIP() << "the device has no shaderFloat64";
  for (int64_t n : {1, 7, 8, 13, 100, 1000}) {
    const int64_t n_rows = 3;
    // Scores spread over ±60, so many exps underflow past -87.3 to 0 on some rows.
    const std::vector<float> s = random_floats(n * n_rows, 31 + static_cast<uint32_t>(n), -60.0f, 60.0f);
    std::vector<float> want_p(s.size());
    std::vector<float> want_l(n_rows);
    for (int64_t r = 0; r < n_rows; ++r) want_l[r] = softmax_step_twin(&s[r * n], n, &want_p[r * n]);
    Buffer sb = device_buffer(s.data(), s.size() * sizeof(float));
    Buffer pb = device_buffer(nullptr, s.size() * sizeof(float));
    Buffer lb = device_buffer(nullptr, n_rows * sizeof(float));
    run_recorded([&](CommandRecorder& rec) { return gpu_env().kernels->softmax(rec, sb, pb, lb, n_rows, n); });
    const std::vector<float> got_p = download_floats(pb, s.size());
    const std::vector<float> got_l = download_floats(lb, n_rows);
    ASSERT_EQ(std::memcmp(want_p.data(), got_p.data(), s.size() * sizeof(float)), 0) << "n " << n;
    ASSERT_EQ(std::memcmp(want_l.data(), got_l.data(), n_rows * sizeof(float)), 0) << "n " << n;
  }
}

struct QuantizeCase {
  DType weight_type;
  int64_t n_tokens, n_cols;
};

class GpuQuantize : public ::testing::TestWithParam<QuantizeCase> {};

TEST_P(GpuQuantize, BytesEqualTheHostsAndFeedMatmul) {
  HEARTH_REQUIRE_GPU();
  if (!gpu_env().ctx->info().has_float64) GTEST_SKIP() << "the device has no shaderFloat64";
  const QuantizeCase c = GetParam();
  std::vector<float> x = random_floats(c.n_tokens * c.n_cols, 41, -3.0f, 3.0f);
  for (int i = 0; i < 32; ++i) x[i] = 0.0f;               // an all-zero Q8_0 block: d = 0, every q 0
  if (x.size() > 300) x[290] = 1e-30f, x[291] = -254.0f;  // a tiny value; a block's max exactly 127·d
  std::vector<uint8_t> want;
  prepare_activations(c.weight_type, x.data(), c.n_tokens, c.n_cols, want);
  Buffer xb = device_buffer(x.data(), x.size() * sizeof(float));
  Buffer qb = device_buffer(nullptr, want.size());

  const int64_t n_rows = 67;
  const std::vector<uint8_t> w = random_weights(c.weight_type, n_rows, c.n_cols, 5);
  const size_t row = row_bytes(c.weight_type, c.n_cols);
  std::vector<float> want_y(n_rows * c.n_tokens);
  matmul_reference(MatrixView{c.weight_type, n_rows, c.n_cols, w.data(), row, nullptr}, x.data(), c.n_tokens,
                   want_y.data());
  Buffer wb = device_buffer(w.data(), w.size());
  Buffer yb = device_buffer(nullptr, want_y.size() * sizeof(float));
  run_recorded([&](CommandRecorder& rec) -> Result<void> {
    HEARTH_TRY(gpu_env().kernels->quantize_activations(rec, c.weight_type, xb, qb, c.n_tokens, c.n_cols));
    return gpu_env().kernels->matmul(rec, c.weight_type, wb, n_rows, c.n_cols, row, qb, c.n_tokens, yb);
  });
  std::vector<uint8_t> got(want.size());
  ASSERT_TRUE(qb.download(got.data(), got.size()).ok());
  ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size()), 0);
  const std::vector<float> got_y = download_floats(yb, want_y.size());
  ASSERT_EQ(std::memcmp(want_y.data(), got_y.data(), want_y.size() * sizeof(float)), 0);
}

// Q8_0: odd block counts leave the last pair half full, and 3 × 96 ends a row inside a pair.
INSTANTIATE_TEST_SUITE_P(Shapes, GpuQuantize,
                         ::testing::Values(QuantizeCase{DType::Q4_0, 1, 32}, QuantizeCase{DType::Q4_0, 3, 96},
                                           QuantizeCase{DType::Q8_0, 5, 544}, QuantizeCase{DType::Q4_K, 1, 256},
                                           QuantizeCase{DType::Q6_K, 3, 768}),
                         [](const ::testing::TestParamInfo<QuantizeCase>& info) {
                           const QuantizeCase& c = info.param;
                           return std::string(dtype_name(c.weight_type)) + "_t" + std::to_string(c.n_tokens) + "x" +
                                  std::to_string(c.n_cols);
                         });

}  // namespace
}  // namespace hearth::gpu
