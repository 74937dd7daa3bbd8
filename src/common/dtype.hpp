// Element types of stored tensors. Names are safetensors' spellings, used
// verbatim in the HDF5 `dtype` attribute and in manifest.json.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace trillion {

enum class DType : uint8_t { F32, BF16, F16, F8_E4M3, I32, I64, U8, I8 };

const char* dtype_name(DType t);
DType dtype_from_name(const std::string& s);   // throws FormatError naming the string
size_t dtype_size(DType t);

}  // namespace trillion
