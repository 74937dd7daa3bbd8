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
