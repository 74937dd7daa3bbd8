// Row groups in expert mode (Transformer::set_groups): the constants the
// engine splits by and `trillion plan` predicts with, in one place.
#pragma once
#include <cstdint>

namespace trillion {

// Groups of a rank's rows per step when --micro-batches is 0. A step too
// small to split forms one group and exchanges as if there were one.
inline constexpr int kDefaultRowGroups = 2;

// A group of few rows is not worth its own pass over the attention and
// dense weights: while streaming them, not the arithmetic, sets the pace, a
// second pass costs more than the exchange it hides (the bench model, 2
// ranks x 1 thread: decode at 16 rows a rank split in two ran 15% slower,
// prefill at 128 rows a rank 5% faster). So a step forms at most
// rows / kMinGroupRows groups.
inline constexpr int64_t kMinGroupRows = 32;

}  // namespace trillion
