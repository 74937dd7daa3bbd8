// The C allocator's settings for a process that runs model steps.
#pragma once

namespace trillion::platform {

// A step allocates its activations afresh (a 512-token prefill: tens of MB
// per layer) and frees them. glibc's defaults hand such blocks back to the
// kernel on free (mmap above a threshold that adapts, a heap trimmed once
// 128 KiB at its top are free), so the next step faults every page in
// again. On a machine whose page faults are slow (a VM) that was most of a
// prefill's time, and these settings more than doubled its speed. Blocks up
// to 32 MiB (glibc's largest mmap threshold) come from the heap, and the
// heap keeps up to 1 GiB of freed memory for the next step (the peak a step
// needs stays resident). Call first thing in main();
// a no-op when GLIBC_TUNABLES sets malloc tunables (the user's choice wins),
// off glibc, and on macOS (whose malloc has no such thresholds to set).
void configure_allocator();

}  // namespace trillion::platform
