// The one loop every peak probe runs (peak_probe.hpp), instantiated in each
// ISA's file with that ISA's instruction: P::kChains independent
// accumulators, each advanced by P::step once a round, so what is timed is
// the instruction's throughput, not its latency. Each round first passes the
// probe's operands through P::opaque (an empty asm statement: the compiler
// must assume they changed), so no round's products can be hoisted out of
// the loop; a step combines chain k's accumulator with operands that differ
// from chain to chain, so no two chains merge. Internal linkage: each
// ISA-flagged file gets its own copy.
#pragma once
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace trillion {

// A probe as the driver (peak_probe.cpp) runs it: rounds of every chain; returns a sink value.
struct PeakLoop {
  double (*run)(long rounds);
  int chains;
};

namespace {

// For the probes whose chain is the accumulator and whose operands are constants.
struct NoOperands {
  struct Operands {};
  static Operands operands() { return {}; }
  static void opaque(Operands&) {}
};

// The usual probe: the chain is the accumulator, of lanes of type Lane
// (chain k starts at k, or 1 + k/1000 for floats), advanced by Step, one
// instruction with constant operands. An ISA file gives Step, a function of
// its own (so it is built with its flags), Lane and the number of chains;
// the vector type is Step's (not a template argument: GCC drops the
// attributes of __m256 and its kin there, and warns).
template <class R>
R vector_of(R (*)(R));

template <auto Step, class Lane, int Chains>
struct AccumulatorChains : NoOperands {
  using V = decltype(vector_of(Step));
  static constexpr int kChains = Chains;
  static V init(int k) {
    const Lane l = std::is_floating_point_v<Lane> ? Lane(1.0f + float(k) * 1e-3f) : Lane(k);
    V v;
    for (size_t i = 0; i < sizeof(V) / sizeof(Lane); ++i)
      std::memcpy(reinterpret_cast<char*>(&v) + i * sizeof l, &l, sizeof l);
    return v;
  }
  static V step(V a, const Operands&, int) { return Step(a); }
  static double fold(V a) {
    Lane l;
    std::memcpy(&l, &a, sizeof l);
    return double(l);
  }
};

template <class P>
double run_chains(long rounds) {
  typename P::V a[P::kChains];
  for (int k = 0; k < P::kChains; ++k) a[k] = P::init(k);
  typename P::Operands in = P::operands();
  for (long i = 0; i < rounds; ++i) {
    P::opaque(in);
    for (int k = 0; k < P::kChains; ++k) a[k] = P::step(a[k], in, k);
  }
  double sink = 0;
  for (int k = 0; k < P::kChains; ++k) sink += P::fold(a[k]);
  return sink;
}

template <class P>
PeakLoop peak_loop() {
  return {&run_chains<P>, P::kChains};
}

}  // namespace
}  // namespace trillion
