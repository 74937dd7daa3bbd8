#include "store/quantize.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/numeric.hpp"
#include "common/thread_pool.hpp"

namespace trillion {

namespace {

constexpr int64_t kGroup = 32;     // int8 / int4: columns per scale
constexpr int64_t kBlock = 128;    // fp8: 128x128 blocks per scale
constexpr float kFp8Max = 448.0f;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Round to nearest, ties to even, for |t| < 2^51 (exact in the default
// rounding mode; vectorizes, unlike nearbyint without SSE4.1).
inline double round_even(double t) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  return (t + kMagic) - kMagic;
}

// Per-row partial results, reduced in row order afterwards, so the totals do
// not depend on how rows were split over threads.
struct RowStats {
  std::vector<double> err, sq, max;
  std::vector<int64_t> bad;  // the column of the row's first non-finite value, or -1
  explicit RowStats(int64_t rows)
      : err(size_t(rows)), sq(size_t(rows)), max(size_t(rows)), bad(size_t(rows), -1) {}

  QuantStats total(const std::string& prefix) const {
    QuantStats s;
    for (size_t r = 0; r < err.size(); ++r) {
      if (bad[r] >= 0)
        throw FormatError("tensor '" + prefix + ".weight': value at [" + std::to_string(r) + ", " +
                          std::to_string(bad[r]) + "] is not finite; cannot quantize");
      s.sum_sq_err += err[r];
      s.sum_sq += sq[r];
      s.max_abs_err = std::max(s.max_abs_err, max[r]);
    }
    return s;
  }
};

// Pairwise reductions of a group in place (result in v[0]); each step is an
// elementwise loop the compiler vectorizes, in a fixed order.
inline void tree_sum(double* v) {
  for (int64_t w = kGroup / 2; w >= 1; w /= 2)
    for (int64_t i = 0; i < w; ++i) v[i] += v[i + w];
}
inline void tree_max(double* v) {
  for (int64_t w = kGroup / 2; w >= 1; w /= 2)
    for (int64_t i = 0; i < w; ++i) v[i] = v[i + w] > v[i] ? v[i + w] : v[i];
}

void run_rows(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool && n > 1) pool->parallel_for(n, grain, fn);
  else fn(0, n);
}

QuantTensor make_tensor(std::string name, DType dt, std::vector<int64_t> shape) {
  QuantTensor t{std::move(name), dt, std::move(shape), {}, {}};
  uint64_t n = dtype_size(dt);
  for (int64_t d : t.shape) n *= uint64_t(d);
  t.data.resize(n);
  return t;
}

// int8 (qmax 127) and int4 (qmax 7): symmetric, one bf16 scale per 32 columns.
// Row r of a matrix as exact doubles (bf16, or FP8 code x block scale).
using RowReader = std::function<void(int64_t r, double* row)>;

QuantizedMatrix quantize_groups(WeightFormat format, const std::string& prefix, const RowReader& read,
                                int64_t rows, int64_t cols, ThreadPool* pool) {
  const bool int4 = format == WeightFormat::int4_group;
  const double qmax = int4 ? 7.0 : 127.0;
  const int64_t sc = ceil_div(cols, kGroup);
  QuantizedMatrix out;
  if (int4) {
    out.tensors.push_back(make_tensor(prefix + ".weight_packed", DType::I32, {rows, cols / 8}));
    out.tensors.back().weight_shape = {rows, cols};
  } else {
    out.tensors.push_back(make_tensor(prefix + ".weight", DType::I8, {rows, cols}));
  }
  out.tensors.push_back(make_tensor(prefix + ".weight_scale", DType::BF16, {rows, sc}));
  std::byte* qdata = out.tensors[0].data.data();
  uint16_t* scales = reinterpret_cast<uint16_t*>(out.tensors[1].data.data());
  RowStats rs(rows);

  run_rows(pool, rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    // Per group: values, rounded quotients, errors; written so the compiler
    // vectorizes each loop (sums and maxima over a group are pairwise trees:
    // the order is a function of the column, never of the threads).
    alignas(64) double x[kGroup], qd[kGroup], a[kGroup], e2[kGroup], x2[kGroup], ae[kGroup];
    const int64_t ncols = cols, nsc = sc;  // locals: the int8 stores below may alias anything
    std::vector<int32_t> q(static_cast<size_t>(ncols));
    std::vector<double> row(static_cast<size_t>(ncols));
    for (int64_t r = r0; r < r1; ++r) {
      read(r, row.data());
      const auto bad = std::find_if(row.begin(), row.end(), [](double v) { return !std::isfinite(v); });
      if (bad != row.end()) {
        rs.bad[size_t(r)] = bad - row.begin();
        continue;
      }
      double err = 0, sq = 0, mx = 0;
      for (int64_t g = 0; g < nsc; ++g) {
        const int64_t c0 = g * kGroup, n = std::min(kGroup, ncols - c0);
        for (int64_t i = n; i < kGroup; ++i) x[i] = 0.0;  // a partial group: zeros change nothing
        for (int64_t i = 0; i < n; ++i) x[i] = row[size_t(c0 + i)];
        for (int64_t i = 0; i < kGroup; ++i) a[i] = std::fabs(x[i]);
        tree_max(a);
        const double amax = a[0];
        const uint16_t s = amax > 0 ? bf16_round_up(amax / qmax) : uint16_t(0);
        scales[r * nsc + g] = s;
        const double sd = bf16_to_f32(s);
        if (sd > 0) {
          for (int64_t i = 0; i < kGroup; ++i) {
            const double t = round_even(x[i] / sd);
            qd[i] = t < -qmax ? -qmax : (t > qmax ? qmax : t);
          }
        } else {
          for (int64_t i = 0; i < kGroup; ++i) qd[i] = 0.0;
        }
        for (int64_t i = 0; i < n; ++i) q[size_t(c0 + i)] = int32_t(qd[i]);
        for (int64_t i = 0; i < kGroup; ++i) {
          const double e = x[i] - qd[i] * sd;
          e2[i] = e * e;
          x2[i] = x[i] * x[i];
          ae[i] = std::fabs(e);
        }
        tree_sum(e2);
        tree_sum(x2);
        tree_max(ae);
        err += e2[0];
        sq += x2[0];
        mx = ae[0] > mx ? ae[0] : mx;
      }
      if (int4) {
        uint32_t* words = reinterpret_cast<uint32_t*>(qdata) + r * (ncols / 8);
        for (int64_t j = 0; j < ncols / 8; ++j) {
          uint32_t word = 0;
          for (int i = 0; i < 8; ++i) word |= uint32_t(q[size_t(8 * j + i)] + 8) << (4 * i);
          words[j] = word;
        }
      } else {
        int8_t* dst = reinterpret_cast<int8_t*>(qdata) + r * ncols;
        const int32_t* src = q.data();
        for (int64_t c = 0; c < ncols; ++c) dst[c] = int8_t(src[c]);
      }
      rs.err[size_t(r)] = err;
      rs.sq[size_t(r)] = sq;
      rs.max[size_t(r)] = mx;
    }
  });
  out.stats = rs.total(prefix);
  return out;
}

RowReader bf16_rows(const uint16_t* w, int64_t cols) {
  return [w, cols](int64_t r, double* row) {
    for (int64_t c = 0; c < cols; ++c) row[c] = bf16_to_f32(w[r * cols + c]);
  };
}

// DeepSeek-V3's FP8: e4m3 codes and an f32 scale_inv per 128x128 block.
QuantizedMatrix quantize_fp8(const std::string& prefix, const uint16_t* w, int64_t rows, int64_t cols,
                             ThreadPool* pool) {
  const int64_t rb = ceil_div(rows, kBlock), cb = ceil_div(cols, kBlock);
  QuantizedMatrix out;
  out.tensors.push_back(make_tensor(prefix + ".weight", DType::F8_E4M3, {rows, cols}));
  out.tensors.push_back(make_tensor(prefix + ".weight_scale_inv", DType::F32, {rb, cb}));
  uint8_t* codes = reinterpret_cast<uint8_t*>(out.tensors[0].data.data());
  float* scales = reinterpret_cast<float*>(out.tensors[1].data.data());
  RowStats rs(rows);

  run_rows(pool, rb, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> amax(static_cast<size_t>(cb));
    for (int64_t br = b0; br < b1; ++br) {
      const int64_t r0 = br * kBlock, r1 = std::min(rows, r0 + kBlock);
      std::fill(amax.begin(), amax.end(), 0.0f);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const float a = std::fabs(bf16_to_f32(w[r * cols + c]));
          if (!(a <= FLT_MAX) && rs.bad[size_t(r)] < 0) rs.bad[size_t(r)] = c;
          amax[size_t(c / kBlock)] = std::max(amax[size_t(c / kBlock)], a);
        }
      }
      for (int64_t b = 0; b < cb; ++b) {
        float s = amax[size_t(b)] / kFp8Max;
        if (!(s > 0)) s = 1.0f;  // an all-zero block (or one too small for an f32 scale)
        scales[br * cb + b] = s;
      }
      for (int64_t r = r0; r < r1; ++r) {
        double err = 0, sq = 0, mx = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const float x = bf16_to_f32(w[r * cols + c]);
          const float s = scales[br * cb + c / kBlock];
          const uint8_t code = f32_to_e4m3(x / s);
          codes[r * cols + c] = code;
          const double e = double(x) - double(fp8e4m3_to_f32(code)) * double(s);
          err += e * e;
          sq += double(x) * double(x);
          mx = std::max(mx, std::fabs(e));
        }
        rs.err[size_t(r)] = err;
        rs.sq[size_t(r)] = sq;
        rs.max[size_t(r)] = mx;
      }
    }
  });
  out.stats = rs.total(prefix);
  return out;
}

std::string fmt_count(int64_t n) {
  char buf[32];
  if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2f B", double(n) / 1e9);
  else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.2f M", double(n) / 1e6);
  else if (n >= 1000) std::snprintf(buf, sizeof buf, "%.1f k", double(n) / 1e3);
  else std::snprintf(buf, sizeof buf, "%lld", (long long)n);
  return buf;
}

const LinearRole kRoles[] = {LinearRole::attention, LinearRole::dense_mlp, LinearRole::shared_experts,
                             LinearRole::routed_experts, LinearRole::lm_head};

nlohmann::json stats_json(const QuantStats& s) {
  return {{"matrices", s.matrices},       {"parameters", s.params},   {"bytes", s.bytes},
          {"bits_per_weight", s.bits_per_weight()}, {"rel_rms_error", s.rel_rms()},
          {"max_abs_error", s.max_abs_err}, {"sum_sq_error", s.sum_sq_err}, {"sum_sq", s.sum_sq}};
}

}  // namespace

void QuantStats::add(const QuantStats& o) {
  matrices += o.matrices;
  params += o.params;
  bytes += o.bytes;
  sum_sq_err += o.sum_sq_err;
  sum_sq += o.sum_sq;
  max_abs_err = std::max(max_abs_err, o.max_abs_err);
}

double QuantStats::rel_rms() const { return sum_sq > 0 ? std::sqrt(sum_sq_err / sum_sq) : 0.0; }
double QuantStats::bits_per_weight() const { return params > 0 ? 8.0 * double(bytes) / double(params) : 0.0; }

uint16_t bf16_round_up(double x) {
  // Truncating float(x) gives a bf16 <= x (or one ulp above when float rounding
  // went up past it); step up until it is >= x: at most two steps.
  const uint32_t u = std::bit_cast<uint32_t>(float(x));
  uint16_t b = uint16_t(u >> 16);
  while (double(bf16_to_f32(b)) < x) ++b;
  return b;
}

uint8_t f32_to_e4m3(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = uint8_t((u >> 24) & 0x80);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint8_t(sign | 0x7f);  // NaN
  uint32_t code;
  if (a >= 0x3c800000u) {  // |x| >= 2^-6, the normal range: round the mantissa to 3 bits
    const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
    code = std::min<uint32_t>(r - (120u << 3), 0x7eu);  // saturate at 448 (also +inf)
  } else {  // subnormal: m * 2^-9, m = rint(|x| * 512) (the scaling is exact)
    code = uint32_t(round_even(double(std::bit_cast<float>(a)) * 512.0));
  }
  return uint8_t(sign | code);
}

bool quantizable(WeightFormat format, int64_t cols) {
  switch (format) {
    case WeightFormat::int8_group:
    case WeightFormat::fp8_block: return true;
    case WeightFormat::int4_group: return cols % kGroup == 0;
    case WeightFormat::bf16: return false;
  }
  return false;
}

uint64_t quantized_bytes(WeightFormat format, int64_t rows, int64_t cols) {
  const uint64_t n = uint64_t(rows) * uint64_t(cols);
  switch (format) {
    case WeightFormat::int8_group: return n + uint64_t(rows) * uint64_t(ceil_div(cols, kGroup)) * 2;
    case WeightFormat::int4_group: return n / 2 + uint64_t(rows) * uint64_t(cols / kGroup) * 2;
    case WeightFormat::fp8_block: return n + uint64_t(ceil_div(rows, kBlock) * ceil_div(cols, kBlock)) * 4;
    case WeightFormat::bf16: return n * 2;
  }
  return n * 2;
}

QuantizedMatrix quantize_matrix(WeightFormat format, const std::string& prefix, const uint16_t* w, int64_t rows,
                                int64_t cols, ThreadPool* pool) {
  if (rows <= 0 || cols <= 0) throw FormatError("tensor '" + prefix + ".weight': empty matrix, nothing to quantize");
  if (!quantizable(format, cols))
    throw FormatError("tensor '" + prefix + ".weight': " + to_string(format) + " cannot store in_features " +
                      std::to_string(cols));
  QuantizedMatrix q = format == WeightFormat::fp8_block
                          ? quantize_fp8(prefix, w, rows, cols, pool)
                          : quantize_groups(format, prefix, bf16_rows(w, cols), rows, cols, pool);
  q.stats.matrices = 1;
  q.stats.params = rows * cols;
  for (const QuantTensor& t : q.tensors) q.stats.bytes += t.data.size();
  return q;
}

std::vector<float> fp8_block_scales(const std::string& prefix, DType dtype, const std::vector<int64_t>& shape,
                                    const void* data, int64_t rows, int64_t cols) {
  const std::vector<int64_t> want{ceil_div(rows, kBlock), ceil_div(cols, kBlock)};
  if (dtype != DType::F32 || shape != want)
    throw FormatError("tensor '" + prefix + ".weight_scale_inv': expected F32 " + shape_string(want) + " (the 128x128 "
                      "blocks of [" + std::to_string(rows) + ", " + std::to_string(cols) + "]), got " +
                      dtype_name(dtype) + " " + shape_string(shape));
  std::vector<float> scale(size_t(want[0] * want[1]));
  std::memcpy(scale.data(), data, scale.size() * sizeof(float));
  return scale;
}

QuantizedMatrix requantize_fp8_to_int8(const std::string& prefix, const uint8_t* codes, const float* scale_inv,
                                       int64_t rows, int64_t cols, ThreadPool* pool) {
  if (rows <= 0 || cols <= 0) throw FormatError("tensor '" + prefix + ".weight': empty matrix, nothing to quantize");
  const int64_t cb = ceil_div(cols, kBlock);
  // e4m3 (4 significant bits) times an f32 scale (24) is exact in a double.
  const RowReader read = [=](int64_t r, double* row) {
    const float* s = scale_inv + (r / kBlock) * cb;
    for (int64_t c = 0; c < cols; ++c) row[c] = double(fp8e4m3_to_f32(codes[r * cols + c])) * double(s[c / kBlock]);
  };
  QuantizedMatrix q = quantize_groups(WeightFormat::int8_group, prefix, read, rows, cols, pool);
  q.stats.matrices = 1;
  q.stats.params = rows * cols;
  for (const QuantTensor& t : q.tensors) q.stats.bytes += t.data.size();
  return q;
}

void QuantizationReport::add(const std::string& name, LinearRole role, const std::vector<int64_t>& shape,
                             const QuantStats& s) {
  matrices.push_back(Matrix{name, role, shape, s});
  roles[role].add(s);
  overall.add(s);
}

const char* quantization_method(WeightFormat format) {
  switch (format) {
    case WeightFormat::int8_group:
      return "symmetric int8, one bf16 scale per 32 input columns (last group partial): scale = the smallest bf16 "
             ">= absmax/127, q = round_half_even(w/scale) in [-127, 127]";
    case WeightFormat::int4_group:
      return "symmetric int4 (compressed-tensors pack-quantized), one bf16 scale per 32 input columns: scale = "
             "the smallest bf16 >= absmax/7, q = round_half_even(w/scale) in [-7, 7], stored as q+8";
    case WeightFormat::fp8_block:
      return "e4m3fn with an f32 scale_inv per 128x128 block: scale_inv = f32(absmax/448) (1 if 0), code = "
             "e4m3(f32(w/scale_inv)) rounded to nearest even, saturating";
    case WeightFormat::bf16: return "none";
  }
  return "?";
}

void print_quantization(std::ostream& out, const QuantizationReport& r) {
  char buf[256];
  out << "quantization to " << to_string(r.format) << " (from " << to_string(r.from)
      << "): relative RMS error ||W - Q(W)|| / ||W|| and max |W - Q(W)| per role";
  if (r.from == WeightFormat::fp8_block) out << " (W: each fp8 weight's exact value, code x block scale)";
  out << "\n";
  std::snprintf(buf, sizeof buf, "  %-16s %8s %12s %12s %14s %12s\n", "role", "matrices", "parameters",
                "bits/weight", "rel RMS error", "max |error|");
  out << buf;
  auto line = [&](const char* name, const QuantStats& s) {
    std::snprintf(buf, sizeof buf, "  %-16s %8lld %12s %12.3f %14.3e %12.3e\n", name, (long long)s.matrices,
                  fmt_count(s.params).c_str(), s.bits_per_weight(), s.rel_rms(), s.max_abs_err);
    out << buf;
  };
  for (LinearRole role : kRoles) {
    auto it = r.roles.find(role);
    if (it != r.roles.end()) line(to_string(role), it->second);
  }
  line("overall", r.overall);
  if (!r.kept.empty()) {
    out << "  kept bf16 (in_features not a multiple of 32, which int4 needs): " << r.kept.size() << " matri"
        << (r.kept.size() == 1 ? "x" : "ces") << ":";
    for (size_t i = 0; i < r.kept.size() && i < 6; ++i) out << " " << r.kept[i];
    if (r.kept.size() > 6) out << " ... (all in quantization.json)";
    out << "\n";
  }
}

nlohmann::json quantization_json(const QuantizationReport& r, const std::string& source) {
  using nlohmann::json;
  json roles = json::object();
  for (LinearRole role : kRoles) {
    auto it = r.roles.find(role);
    if (it != r.roles.end()) roles[to_string(role)] = stats_json(it->second);
  }
  json matrices = json::object();
  for (const auto& m : r.matrices) {
    json e = stats_json(m.stats);
    e.erase("matrices");
    e["role"] = to_string(m.role);
    e["shape"] = m.shape;
    matrices[m.name] = std::move(e);
  }
  return json{{"weight_format", to_string(r.format)},
              {"quantized_from", to_string(r.from)},
              {"source", source},
              {"method", quantization_method(r.format)},
              {"roles", std::move(roles)},
              {"overall", stats_json(r.overall)},
              {"kept_bf16", r.kept},
              {"matrices", std::move(matrices)}};
}

}  // namespace trillion
