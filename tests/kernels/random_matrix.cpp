#include "random_matrix.hpp"

#include <cmath>
#include <cstring>

#include "common/numeric.hpp"

namespace trillion::test {

const char* format_name(MatFormat f) {
  switch (f) {
    case MatFormat::F32: return "F32";
    case MatFormat::BF16: return "BF16";
    case MatFormat::FP8_B128: return "FP8_B128";
    case MatFormat::INT4_G32: return "INT4_G32";
    case MatFormat::INT8_G32: return "INT8_G32";
  }
  return "?";
}

std::vector<float> random_floats(int64_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(size_t(n > 0 ? n : 0));
  for (float& f : v) f = u(rng);
  return v;
}

RandomMatrix::RandomMatrix(MatFormat format_, int64_t rows_, int64_t cols_, uint64_t seed)
    : format(format_), rows(rows_), cols(cols_) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t n = rows * cols;
  switch (format) {
    case MatFormat::F32: {
      data.resize(size_t(4 * n));
      for (int64_t i = 0; i < n; ++i) { float f = u(rng); std::memcpy(&data[size_t(4 * i)], &f, 4); }
      break;
    }
    case MatFormat::BF16: {
      data.resize(size_t(2 * n));
      for (int64_t i = 0; i < n; ++i) { uint16_t h = f32_to_bf16(u(rng)); std::memcpy(&data[size_t(2 * i)], &h, 2); }
      break;
    }
    case MatFormat::FP8_B128: {
      data.resize(size_t(n));
      for (auto& b : data) {
        do b = uint8_t(rng()); while ((b & 0x7f) == 0x7f);  // no NaN codes
      }
      scale_cols = (cols + 127) / 128;
      const int64_t sr = (rows + 127) / 128;
      scale.resize(size_t(4 * sr * scale_cols));
      std::uniform_real_distribution<float> us(0.5f / 448, 4.0f / 448);
      for (int64_t i = 0; i < sr * scale_cols; ++i) { float f = us(rng); std::memcpy(&scale[size_t(4 * i)], &f, 4); }
      break;
    }
    case MatFormat::INT4_G32: {
      data.resize(size_t(n / 2));
      for (auto& b : data) b = uint8_t(rng());
      scale_cols = cols / 32;
      scale.resize(size_t(2 * rows * scale_cols));
      std::uniform_real_distribution<float> us(0.01f, 0.2f);
      for (int64_t i = 0; i < rows * scale_cols; ++i) {
        uint16_t h = f32_to_bf16(us(rng));
        std::memcpy(&scale[size_t(2 * i)], &h, 2);
      }
      break;
    }
    case MatFormat::INT8_G32: {
      data.resize(size_t(n));
      for (auto& b : data) b = uint8_t(rng());  // q in [-128, 127]: every int8, -128 included
      scale_cols = (cols + 31) / 32;
      scale.resize(size_t(2 * rows * scale_cols));
      std::uniform_real_distribution<float> us(0.001f, 0.02f);
      for (int64_t i = 0; i < rows * scale_cols; ++i) {
        uint16_t h = f32_to_bf16(us(rng));
        std::memcpy(&scale[size_t(2 * i)], &h, 2);
      }
      break;
    }
  }
}

RandomMatrix RandomMatrix::fp8(int64_t rows, int64_t cols, uint64_t seed, const std::vector<float>& scales,
                               bool nan_codes) {
  RandomMatrix m(MatFormat::FP8_B128, rows, cols, seed);
  if (nan_codes) {
    std::mt19937_64 rng(seed + 1);
    for (auto& b : m.data) b = uint8_t(rng());  // every byte, 0x7F and 0xFF (NaN) included
  }
  for (size_t i = 0; i < m.scale.size() / 4; ++i) std::memcpy(&m.scale[4 * i], &scales[i % scales.size()], 4);
  return m;
}

QMatrix RandomMatrix::view() const {
  QMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.data = data.data();
  m.scale = scale.empty() ? nullptr : scale.data();
  m.scale_cols = scale_cols;
  return m;
}

double RandomMatrix::value(int64_t r, int64_t c) const {
  const int64_t i = r * cols + c;
  switch (format) {
    case MatFormat::F32: { float f; std::memcpy(&f, &data[size_t(4 * i)], 4); return f; }
    case MatFormat::BF16: { uint16_t h; std::memcpy(&h, &data[size_t(2 * i)], 2); return bf16_to_f32(h); }
    case MatFormat::FP8_B128: {
      float s;
      std::memcpy(&s, &scale[size_t(4 * ((r / 128) * scale_cols + c / 128))], 4);
      return double(fp8e4m3_to_f32(data[size_t(i)])) * double(s);
    }
    case MatFormat::INT4_G32: {
      const int nib = (data[size_t(i / 2)] >> (4 * (i % 2))) & 15;  // little-endian words: byte i/2
      uint16_t h;
      std::memcpy(&h, &scale[size_t(2 * (r * scale_cols + c / 32))], 2);
      return double(nib - 8) * double(bf16_to_f32(h));
    }
    case MatFormat::INT8_G32: {
      uint16_t h;
      std::memcpy(&h, &scale[size_t(2 * (r * scale_cols + c / 32))], 2);
      return double(int8_t(data[size_t(i)])) * double(bf16_to_f32(h));
    }
  }
  return 0.0;
}

int32_t RandomMatrix::qvalue(int64_t r, int64_t c) const {
  const int64_t i = r * cols + c;
  if (format == MatFormat::INT4_G32) return ((data[size_t(i / 2)] >> (4 * (i % 2))) & 15) - 8;
  return int8_t(data[size_t(i)]);
}

float RandomMatrix::qscale(int64_t r, int64_t g) const {
  uint16_t h;
  std::memcpy(&h, &scale[size_t(2 * (r * scale_cols + g))], 2);
  return bf16_to_f32(h);
}

void matmul_f64(const RandomMatrix& W, const std::vector<float>& x, int64_t n, std::vector<double>& y,
                std::vector<double>& s) {
  y.assign(size_t(n * W.rows), 0.0);
  s.assign(size_t(n * W.rows), 0.0);
  for (int64_t r = 0; r < W.rows; ++r)
    for (int64_t c = 0; c < W.cols; ++c) {
      const double w = W.value(r, c);
      for (int64_t t = 0; t < n; ++t) {
        const double p = w * double(x[size_t(t * W.cols + c)]);
        y[size_t(t * W.rows + r)] += p;
        s[size_t(t * W.rows + r)] += std::fabs(p);
      }
    }
}

void matmul_t_f64(const RandomMatrix& W, const std::vector<float>& x, int64_t n, std::vector<double>& y,
                  std::vector<double>& s) {
  y.assign(size_t(n * W.cols), 0.0);
  s.assign(size_t(n * W.cols), 0.0);
  for (int64_t r = 0; r < W.rows; ++r)
    for (int64_t c = 0; c < W.cols; ++c) {
      const double w = W.value(r, c);
      for (int64_t t = 0; t < n; ++t) {
        const double p = w * double(x[size_t(t * W.rows + r)]);
        y[size_t(t * W.cols + c)] += p;
        s[size_t(t * W.cols + c)] += std::fabs(p);
      }
    }
}

}  // namespace trillion::test
