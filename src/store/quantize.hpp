// `trillion convert --quantize int8|int4|fp8`: requantizes a bf16 matrix into
// one of the formats the kernels read (docs/format.md "Quantized models"),
// and measures the error it makes. Every rounding rule is exact and
// deterministic (results do not depend on the thread count), so an
// independent implementation (tests/e2e/test_quantize.py) reproduces the
// bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/dtype.hpp"
#include "config/model_config.hpp"
#include "format/hf_tensors.hpp"

namespace trillion {

class ThreadPool;

// Error of a quantization, W the bf16 matrix and Q(W) its dequantized value
// (computed in float64, exactly as the kernels see it).
struct QuantStats {
  int64_t matrices = 0;
  int64_t params = 0;       // elements of W
  uint64_t bytes = 0;       // stored bytes (data + scales)
  double sum_sq_err = 0;    // sum (W - Q(W))^2
  double sum_sq = 0;        // sum W^2
  double max_abs_err = 0;   // max |W - Q(W)|

  void add(const QuantStats& o);
  double rel_rms() const;          // ||W - Q(W)|| / ||W|| (0 for W = 0)
  double bits_per_weight() const;  // 8 * bytes / params
};

// One tensor of the output (owning its bytes), in the layout the loader reads.
struct QuantTensor {
  std::string name;
  DType dtype = DType::I8;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
  std::vector<int64_t> weight_shape;  // int4 weight_packed: [out, in]
};

struct QuantizedMatrix {
  std::vector<QuantTensor> tensors;  // int8: .weight I8, .weight_scale BF16; fp8: .weight F8_E4M3,
                                     // .weight_scale_inv F32; int4: .weight_packed I32, .weight_scale BF16
  QuantStats stats;
};

// Whether `format` can store a [rows, cols] matrix (int4: cols % 32 == 0).
bool quantizable(WeightFormat format, int64_t cols);

// Bytes quantize_matrix stores for a [rows, cols] matrix.
uint64_t quantized_bytes(WeightFormat format, int64_t rows, int64_t cols);

// Quantizes the bf16 matrix `w` [rows, cols] (row-major) named `prefix`
// ("model.layers.0.self_attn.o_proj"). format: int8_group, int4_group
// (cols % 32 == 0) or fp8_block. Throws FormatError naming the tensor when a
// value is not finite. `pool` may be null (single-threaded).
QuantizedMatrix quantize_matrix(WeightFormat format, const std::string& prefix, const uint16_t* w, int64_t rows,
                                int64_t cols, ThreadPool* pool);

// DeepSeek's FP8 matrix (e4m3 codes [rows, cols], f32 scale_inv per 128x128
// block [ceil(rows/128), ceil(cols/128)]) as int8 groups: each weight's exact
// value (code x scale) is quantized by quantize_matrix's int8_group rule. The
// integer-dot path runs FP8 models on the result (store/int8_source.hpp);
// stats measure the error against the FP8 values.
QuantizedMatrix requantize_fp8_to_int8(const std::string& prefix, const uint8_t* codes, const float* scale_inv,
                                       int64_t rows, int64_t cols, ThreadPool* pool);

// The weight_scale_inv of FP8 matrix `prefix` [rows, cols], checked (F32,
// [ceil(rows/128), ceil(cols/128)]) and copied out of `data` (a safetensors
// offset need not be 4-byte aligned): what requantize_fp8_to_int8 reads, for
// convert's quantizer and the run-time int8 copy alike.
std::vector<float> fp8_block_scales(const std::string& prefix, DType dtype, const std::vector<int64_t>& shape,
                                    const void* data, int64_t rows, int64_t cols);

// The scalar rules (exposed for tests).
uint16_t bf16_round_up(double x);   // the smallest bf16 >= x (x >= 0, finite)
uint8_t f32_to_e4m3(float x);       // round to nearest even, saturating at +-448, NaN -> 0x7f|sign

// What `convert --quantize` did: per role and overall, per matrix, and the
// matrices it kept in bf16 (int4 with in_features % 32 != 0).
struct QuantizationReport {
  WeightFormat format = WeightFormat::int8_group;
  WeightFormat from = WeightFormat::bf16;  // the checkpoint's format (bf16, or fp8 to int8)
  std::map<LinearRole, QuantStats> roles;
  QuantStats overall;
  struct Matrix {
    std::string name;  // the prefix, without ".weight"
    LinearRole role = LinearRole::none;
    std::vector<int64_t> shape;  // [out, in]
    QuantStats stats;
  };
  std::vector<Matrix> matrices;  // in storage order
  std::vector<std::string> kept;  // prefixes stored unchanged (bf16)

  void add(const std::string& name, LinearRole role, const std::vector<int64_t>& shape, const QuantStats& s);
};

// The table convert prints, and quantization.json (docs/format.md).
void print_quantization(std::ostream& out, const QuantizationReport& r);
nlohmann::json quantization_json(const QuantizationReport& r, const std::string& source);

// One line on how `format` rounds, for the report and quantization.json.
const char* quantization_method(WeightFormat format);

}  // namespace trillion
