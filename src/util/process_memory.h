#pragma once
// The process's allocator policy (glibc malloc): what makes `--memory` an RSS bound across model swaps. glibc gives
// each thread that allocates its own arena (up to 8 per core) and keeps what is freed in them; a model unloaded by
// one set of threads and loaded by another left its freed memory behind at every switch (docs/multi-model.md). The
// remedy, chosen by measurement: few arenas, and the free memory of every arena returned to the
// kernel after an unload.

#include <cstddef>

namespace hearth {

// Caps glibc's arena count at `max_arenas` (mallopt M_ARENA_MAX). Call before the threads start: arenas already made
// stay. A no-op for another allocator.
void bound_malloc_arenas(int max_arenas);

// Returns the free memory of every arena to the kernel (malloc_trim(0): whole free pages inside the heaps too, not
// only their tops). Costs a walk of the free lists: call after large frees (a model's unload), not per request.
void return_freed_memory();

// The process's resident set now (/proc/self/statm), in bytes; 0 when unknown.
[[nodiscard]] size_t resident_bytes();

}  // namespace hearth
