#pragma once
// Which instruction set the kernels use. Vector kernels are compiled with function-level target attributes and
// chosen at run time, so one binary runs everywhere; the scalar reference twins are the fallback.
//
// The active level starts as the best the CPU supports, or kScalar when the environment variable
// HEARTH_FORCE_SCALAR is set to a non-empty value other than "0"; HEARTH_MAX_ISA=scalar|avx2|avx2+avxvnni|avx512vnni
// caps it (side-by-side measurements; any other value aborts naming it). Results are deterministic for a given
// level, and may differ in the last bits between levels.

namespace hearth {

enum class IsaLevel {
  kScalar,
  kAvx2,     // AVX2 + FMA + F16C
  kAvxVnni,  // kAvx2 + AVX-VNNI (vpdpbusd on 256-bit vectors) for the packed tiles (kernels/packed.h)
  // kAvx2 + AVX-512 F/BW/VL + AVX512-VNNI: the packed tiles on 512-bit vectors. It does not need AVX-VNNI (Ice Lake
  // and Cascade Lake have AVX512-VNNI only), so a CPU may support this level and not kAvxVnni (isa_supported).
  kAvx512Vnni,
};

const char* isa_level_name(IsaLevel level);

// The best level this CPU supports.
IsaLevel detected_isa_level();

// Whether this CPU has every instruction `level` uses.
bool isa_supported(IsaLevel level);

// The level kernels use now.
IsaLevel active_isa_level();

// True when the active level is `level` or above (every level includes kAvx2's instructions; kAvxVnni's only where
// isa_supported(kAvxVnni)).
inline bool isa_at_least(IsaLevel level) {
  return static_cast<int>(active_isa_level()) >= static_cast<int>(level);
}

// True on AMD Zen 1 (family 17h, znver1), where a 256-bit vcvtph2ps is slow enough that attention over f16 K/V is
// faster with each span converted to floats once than converted again at every load (kernels/attention.h).
bool cpu_is_zen1();

// Sets the active level (tests, benchmarks). A level the CPU does not support becomes the best one below it that it
// does.
// Not synchronized with kernels running on other threads: call it between kernel calls.
void set_isa_level(IsaLevel level);

}  // namespace hearth
