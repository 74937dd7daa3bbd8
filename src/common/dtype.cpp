#include "common/dtype.hpp"

#include "common/error.hpp"

namespace trillion {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::I8: return "I8";
  }
  return "?";
}

DType dtype_from_name(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "BF16") return DType::BF16;
  if (s == "F16") return DType::F16;
  if (s == "F8_E4M3") return DType::F8_E4M3;
  if (s == "I32") return DType::I32;
  if (s == "I64") return DType::I64;
  if (s == "U8") return DType::U8;
  if (s == "I8") return DType::I8;
  throw FormatError("unknown dtype '" + s + "'");
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: return 2;
    case DType::F8_E4M3: case DType::U8: case DType::I8: return 1;
    case DType::I64: return 8;
  }
  return 0;
}

}  // namespace trillion
