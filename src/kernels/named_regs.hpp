// Register tiles' accumulators as named variables, for the ISA files'
// kernels: GCC keeps an array of vectors that a loop updates in memory (a
// store per update; a load too once the loop holds a call), named ones in
// registers. Internal linkage, so an ISA-flagged file's copy stays its own.
#pragma once
#include <utility>

namespace trillion {
namespace {

// Up to 24 vectors of type V (a vector type without attributes the
// template argument would drop: a plain vector_size type on x86, whose
// __m256 carries may_alias), chosen by a constant index.
template <class V>
struct NamedRegs {
  V r0{}, r1{}, r2{}, r3{}, r4{}, r5{}, r6{}, r7{}, r8{}, r9{}, r10{}, r11{}, r12{}, r13{}, r14{}, r15{};
  V r16{}, r17{}, r18{}, r19{}, r20{}, r21{}, r22{}, r23{};
  template <int k>
  V& at() {
    static_assert(k >= 0 && k < 24);
    if constexpr (k == 0) return r0;
    else if constexpr (k == 1) return r1;
    else if constexpr (k == 2) return r2;
    else if constexpr (k == 3) return r3;
    else if constexpr (k == 4) return r4;
    else if constexpr (k == 5) return r5;
    else if constexpr (k == 6) return r6;
    else if constexpr (k == 7) return r7;
    else if constexpr (k == 8) return r8;
    else if constexpr (k == 9) return r9;
    else if constexpr (k == 10) return r10;
    else if constexpr (k == 11) return r11;
    else if constexpr (k == 12) return r12;
    else if constexpr (k == 13) return r13;
    else if constexpr (k == 14) return r14;
    else if constexpr (k == 15) return r15;
    else if constexpr (k == 16) return r16;
    else if constexpr (k == 17) return r17;
    else if constexpr (k == 18) return r18;
    else if constexpr (k == 19) return r19;
    else if constexpr (k == 20) return r20;
    else if constexpr (k == 21) return r21;
    else if constexpr (k == 22) return r22;
    else return r23;
  }
};

// f.template operator()<0>() ... <N - 1>(): a loop with constant indices.
// Always inlined, as the bodies passed to it must be (their lambdas say so:
// GCC left a large one out of line, and the accumulators with it in memory).
template <int N, class F>
[[gnu::always_inline]] inline void unrolled(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) __attribute__((always_inline)) {
    (f.template operator()<I>(), ...);
  }(std::make_integer_sequence<int, N>());
}

}  // namespace
}  // namespace trillion
