#version 450
#extension GL_GOOGLE_include_directive : require
// rope_apply on every head of every token, with the cos/sin table the host filled by rope_fill_cos_sin (one row per
// token's position): x[a] = x0·c − x1·s, x[b] = x0·s + x1·c, pairs (2i, 2i+1) or, NeoX, (i, i + rope_dim/2).
// Four correctly rounded multiplies and two adds, no fma: bitwise the CPU's.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Rows { float x[]; };                // [n_tokens, row_stride], heads inside
layout(std430, binding = 1) readonly buffer CosSin { float cs[]; };   // [n_tokens, rope_dim/2, 2]
layout(push_constant) uniform Push {
  uint n_heads;
  uint head_dim;
  uint rope_dim;
  uint row_stride;  // floats from one token's row to the next
  uint neox;
} pc;

void main() {
  const uint half_dim = pc.rope_dim / 2u;
  const uint i = gl_GlobalInvocationID.x;
  const uint h = gl_GlobalInvocationID.y;
  const uint t = gl_GlobalInvocationID.z;
  if (i >= half_dim || h >= pc.n_heads) return;
  const uint base = t * pc.row_stride + h * pc.head_dim;
  const uint a = base + (pc.neox != 0u ? i : 2u * i);
  const uint b = base + (pc.neox != 0u ? i + half_dim : 2u * i + 1u);
  const float c = cs[t * pc.rope_dim + 2u * i];
  const float s = cs[t * pc.rope_dim + 2u * i + 1u];
  const float x0 = x[a];
  const float x1 = x[b];
  precise const float ya = x0 * c - x1 * s;
  precise const float yb = x0 * s + x1 * c;
  x[a] = ya;
  x[b] = yb;
}
