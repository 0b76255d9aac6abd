#pragma once
// The machine's own speed limits, measured in the same process as a model benchmark so that kernel speed can be
// quoted as a fraction of what the hardware gives right now (the machine is shared; absolute numbers drift).

#include <cstddef>

#include "util/thread_pool.h"

namespace hearth::app {

// Streaming read bandwidth in bytes/s: every thread of `pool` sums its share of a `bytes` buffer (choose it much
// larger than the last-level cache); the best of `reps` passes. Allocates and touches the buffer first, on 2 MiB
// pages where the kernel grants them, as the packed weights are.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// fp32 GEMM FLOP/s of OpenBLAS cblas_sgemm at M = N = K = n with `threads` OpenBLAS threads; best of `reps`.
// OpenBLAS picks its kernel from the environment (OPENBLAS_CORETYPE): run benchmarks with it unset.
double measure_sgemm_flops(int n, int threads, int reps);

// Peak resident set size of this process so far, in bytes (VmHWM).
size_t peak_rss_bytes();

// Resets the peak RSS to the current RSS (writes 5 to /proc/self/clear_refs). False when the kernel refuses.
bool reset_peak_rss();

}  // namespace hearth::app
