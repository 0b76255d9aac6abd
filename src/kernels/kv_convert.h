#pragma once
// One head's slice of a K or V row between floats and its KV dtype, at the active ISA level: what the model stores
// into the pool and what attention reads back. Every vector path is bitwise its scalar twin in tensor/kv_dtype.h.

#include <cstdint>

#include "tensor/kv_dtype.h"

namespace hearth {

// One head's slice of K or V to floats: the vector path where the CPU has one; equal to
// kv_dequantize_head_reference bit for bit.
void kv_dequantize_head(KvDtype type, const uint8_t* src, float* dst, int32_t head_dim);

// kv_dequantize_head for n slices: row j of dst (head_dim floats each) from src[j].
void kv_dequantize_rows(KvDtype type, const uint8_t* const* src, int32_t n, float* dst, int32_t head_dim);

// One head's slice of K or V from floats into its KV dtype: the vector path where the CPU has one (f16: F16C's
// round-to-nearest-even conversion); byte for byte kv_quantize_head.
void kv_store_head(KvDtype type, const float* src, uint8_t* dst, int32_t head_dim);

}  // namespace hearth
