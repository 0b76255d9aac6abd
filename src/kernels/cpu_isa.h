#pragma once
// Which instruction set the kernels use. Vector kernels are compiled with function-level target attributes and
// chosen at run time, so one binary runs everywhere; the scalar reference twins are the fallback.
//
// The active level starts as the best the CPU supports, or kScalar when the environment variable
// HEARTH_FORCE_SCALAR is set to a non-empty value other than "0"; HEARTH_MAX_ISA=scalar|avx2|avx2+avxvnni caps it
// (side-by-side measurements; any other value aborts naming it). Results are deterministic for a given level,
// and may differ in the last bits between levels.

namespace hearth {

enum class IsaLevel {
  kScalar,
  kAvx2,     // AVX2 + FMA + F16C
  kAvxVnni,  // kAvx2 + AVX-VNNI (vpdpbusd on 256-bit vectors) for the packed tiles (kernels/packed.h)
};

const char* isa_level_name(IsaLevel level);

// The best level this CPU supports.
IsaLevel detected_isa_level();

// The level kernels use now.
IsaLevel active_isa_level();

// True when the active level is `level` or above (every level includes the ones below it).
inline bool isa_at_least(IsaLevel level) {
  return static_cast<int>(active_isa_level()) >= static_cast<int>(level);
}

// Sets the active level (tests, benchmarks). A level above detected_isa_level() is clamped to it.
// Not synchronized with kernels running on other threads: call it between kernel calls.
void set_isa_level(IsaLevel level);

}  // namespace hearth
