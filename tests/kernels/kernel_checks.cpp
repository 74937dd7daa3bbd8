#include "kernel_checks.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

namespace trillion::test {

std::string bound_misses(const std::vector<float>& y, const std::vector<double>& y64, const std::vector<double>& s,
                         int64_t k) {
  const double u = std::ldexp(1.0, -24);
  std::ostringstream out;
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double err = std::fabs(double(y[i]) - y64[i]), bound = double(k + 4) * u * s[i] + 1e-30;
    if (!(err <= bound) && bad++ < 5)
      out << "element " << i << ": " << y[i] << " vs " << y64[i] << " (bound " << bound << "); ";
  }
  if (bad > 0) out << bad << " of " << y.size() << " elements outside the bound";
  return out.str();
}

bool same_bits(const float* a, const float* b, size_t n) { return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0; }

std::vector<KernelIsa> available_isas() {
  std::vector<KernelIsa> v;
  for (KernelIsa isa : kAllKernelIsas)
    if (kernel_isa_available(isa)) v.push_back(isa);
  return v;
}

const std::vector<MatmulShape> kMatmulShapes = {
    {MatFormat::F32, 5, 13},         {MatFormat::F32, 64, 256},       {MatFormat::BF16, 7, 200},
    {MatFormat::BF16, 9, 203},       {MatFormat::BF16, 33, 1000},     {MatFormat::FP8_B128, 300, 260},
    {MatFormat::FP8_B128, 130, 128}, {MatFormat::FP8_B128, 257, 385}, {MatFormat::FP8_B128, 3, 7},
    {MatFormat::INT4_G32, 7, 96},    {MatFormat::INT4_G32, 40, 256},  {MatFormat::INT4_G32, 1, 32},
    {MatFormat::INT4_G32, 130, 1056},  // avx512's INT4 rows tile: several prefetch blocks, 2 rows left over
    {MatFormat::INT8_G32, 7, 96},    {MatFormat::INT8_G32, 33, 203},  {MatFormat::INT8_G32, 5, 1000},
    {MatFormat::INT8_G32, 1, 7},
};

}  // namespace trillion::test
