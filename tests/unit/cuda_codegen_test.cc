// The CUDA backend without a GPU: every generated kernel is compiled by
// NVRTC, and also, with a small shim, by the host C++ compiler, then run on
// the CPU one thread per grid (the kernels are grid-stride loops, so one
// thread covers every element) and compared with the host backend's
// results. That checks the index arithmetic, the fusion decisions, the
// element-type handling and the scalar semantics of the generated code;
// the GPU-only parts (warp shuffles, block-level reductions, cuBLASLt) are
// checked by scripts/gpu-check on a machine with a GPU.
// This file: the programs whose kernels are compared so, one by one, and
// every test program of the suites; cuda_codegen_kernels_test.cc checks
// what particular programs generate.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/cuda/backend.h"
#include "gtest/gtest.h"
#include "tests/unit/cuda_emulator.h"
#include "tests/unit/test_programs.h"

namespace pjrt::compiler::cuda {
namespace {

using emulation::Case;
using emulation::CheckAgainstHost;
using emulation::CompareWithHost;

const Case kCases[] = {
    // -0 below +0 in maximum, minimum, clamp and a scatter's maximum; the
    // bits compared, signs of zeros included.
    {"zeros_order_in_maximum_minimum_and_scatter", R"(
HloModule m
hi {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  a = f32[4] constant({0, -0, 0, -0})
  b = f32[4] constant({-0, 0, 0, -0})
  p = f32[4] parameter(0)
  x = f32[4] maximum(a, b)
  n = f32[4] minimum(a, b)
  z = f32[4] broadcast(f32[] constant(0)), dimensions={}
  k = f32[4] clamp(z, b, z)
  i = s32[4,1] constant({{0}, {0}, {1}, {1}})
  s = f32[2] scatter(f32[2] constant({-0, 0}), i, b), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=hi
  ROOT t = (u32[4], u32[4], u32[4], u32[2]) tuple(u32[4] bitcast-convert(x), u32[4] bitcast-convert(n), u32[4] bitcast-convert(k), u32[2] bitcast-convert(s))
})"},
    // Converts into narrow floats from f64 and wide integers round once;
    // values near the ties of each type, compared as bits.
    {"converts_into_narrow_floats_round_once", R"(
HloModule m
ENTRY e {
  i = f64[8] iota(), iota_dimension=0
  t = f64[8] multiply(i, f64[8] broadcast(f64[] constant(9.094947017729282e-13)), dimensions={})
  h = f64[8] add(t, f64[8] broadcast(f64[] constant(1.00390625)), dimensions={})
  w = s64[8] constant({16842753, 16842752, 1099511627777, -1099511627777, 4294967297, 16777217, 3, -3})
  u = u32[8] constant({16842753, 16842755, 4294967295, 0, 1, 2, 3, 4})
  p = f32[4] parameter(0)
  ROOT r = (u16[8], u16[8], u8[8], u16[8], u16[8]) tuple(u16[8] bitcast-convert(bf16[8] convert(h)), u16[8] bitcast-convert(f16[8] convert(h)), u8[8] bitcast-convert(f8e4m3fn[8] convert(h)), u16[8] bitcast-convert(bf16[8] convert(w)), u16[8] bitcast-convert(bf16[8] convert(u)))
})"},
    // A reduction's initial value counts once.
    {"reduce_counts_a_non_identity_initial_value_once", R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[5,19] parameter(0)
  ROOT r = f32[5] reduce(p, f32[] constant(7)), dimensions={1}, to_apply=add
})"},
    {"elementwise_f32_broadcast_transpose", R"(
HloModule m
ENTRY e {
  a = f32[33,65] parameter(0)
  b = f32[65] parameter(1)
  bb = f32[33,65] broadcast(b), dimensions={1}
  s = f32[33,65] add(a, bb)
  m = f32[33,65] multiply(s, a)
  x = f32[33,65] exponential(m)
  l = f32[33,65] log-plus-one(x)
  t = f32[33,65] tanh(l)
  q = f32[33,65] sqrt(x)
  r = f32[33,65] rsqrt(x)
  c = f32[33,65] subtract(q, r)
  d = f32[33,65] divide(c, t)
  mx = f32[33,65] maximum(d, a)
  mn = f32[33,65] minimum(mx, s)
  ROOT tr = f32[65,33] transpose(mn), dimensions={1,0}
})",
     1e-4},
    {"transposes_go_through_shared_memory_tiles", R"(
HloModule m
ENTRY e {
  a = f32[70,45] parameter(0)
  b = f32[45,70] parameter(1)
  c = bf16[5,40,37] parameter(2)
  t = f32[45,70] transpose(a), dimensions={1,0}
  s = f32[45,70] add(t, b)
  e = f32[45,70] exponential(s)
  p = bf16[37,5,40] transpose(c), dimensions={2,0,1}
  n = bf16[37,5,40] negate(p)
  ROOT r = (f32[45,70], bf16[37,5,40]) tuple(e, n)
})",
     1e-5},
    {"half_types_round_after_every_op", R"(
HloModule m
ENTRY e {
  a = bf16[300] parameter(0)
  b = f16[300] parameter(1)
  af = f32[300] convert(a)
  bf = f32[300] convert(b)
  s = f32[300] add(af, bf)
  sb = bf16[300] convert(s)
  m = bf16[300] multiply(sb, a)
  e = bf16[300] exponential(m)
  sh = f16[300] convert(e)
  n = f16[300] negate(sh)
  ROOT t = (bf16[300], f16[300]) tuple(e, n)
})",
     1e-2},
    {"integer_semantics", R"(
HloModule m
ENTRY e {
  a = s32[257] parameter(0)
  b = s32[257] parameter(1)
  d = s32[257] divide(a, b)
  r = s32[257] remainder(a, b)
  sl = s32[257] shift-left(a, b)
  sr = s32[257] shift-right-arithmetic(a, b)
  su = s32[257] shift-right-logical(a, b)
  p = s32[257] power(a, b)
  c = s32[257] count-leading-zeros(a)
  n = s32[257] popcnt(a)
  x = s32[257] xor(d, r)
  ab = s32[257] abs(a)
  sg = s32[257] sign(b)
  ROOT t = (s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257]) tuple(d, r, sl, sr, su, p, c, n, x, ab, sg)
})"},
    {"narrow_and_unsigned_integers", R"(
HloModule m
ENTRY e {
  a = u8[100] parameter(0)
  b = s16[100] parameter(1)
  c = u64[100] parameter(2)
  ab = s16[100] convert(a)
  s = s16[100] add(ab, b)
  m = s16[100] multiply(s, b)
  cu = u64[100] convert(m)
  d = u64[100] divide(c, cu)
  sr = u64[100] shift-right-logical(c, cu)
  ROOT t = (s16[100], u64[100], u64[100]) tuple(m, d, sr)
})"},
    {"converts_saturate_and_compare", R"(
HloModule m
ENTRY e {
  a = f32[64] parameter(0)
  k = f32[] constant(1e10)
  kb = f32[64] broadcast(k), dimensions={}
  big = f32[64] multiply(a, kb)
  i8 = s8[64] convert(big)
  u = u16[64] convert(big)
  i64 = s64[64] convert(big)
  b = pred[64] compare(a, big), direction=LT
  t = pred[64] compare(a, big), direction=GT, type=TOTALORDER
  nb = pred[64] not(b)
  sel = f32[64] select(nb, a, big)
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  cl = f32[64] clamp(lo, sel, hi)
  bits = s32[64] bitcast-convert(cl)
  fin = pred[64] is-finite(big)
  f = f64[64] convert(a)
  ROOT r = (s8[64], u16[64], s64[64], pred[64], pred[64], f32[64], s32[64], pred[64], f64[64]) tuple(i8, u, i64, b, t, cl, bits, fin, f)
})"},
    {"iota_slice_pad_concat_reverse", R"(
HloModule m
ENTRY e {
  a = f32[10,12] parameter(0)
  i = s32[10,12] iota(), iota_dimension=1
  f = f32[10,12] convert(i)
  s = f32[10,12] add(a, f)
  sl = f32[4,5] slice(s), slice={[2:10:2], [1:11:2]}
  z = f32[] constant(0)
  p = f32[7,9] pad(sl, z), padding=1_2x0_4
  r = f32[7,9] reverse(p), dimensions={0,1}
  c = f32[14,9] concatenate(p, r), dimensions={0}
  re = f32[9,14] reshape(c)
  ROOT t = (f32[9,14], f32[4,5]) tuple(re, sl)
})"},
    {"dynamic_slices_clamp_their_starts", R"(
HloModule m
ENTRY e {
  a = f32[8,6] parameter(0)
  u = f32[3,4] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ds = f32[3,4] dynamic-slice(a, i, j), dynamic_slice_sizes={3,4}
  dus = f32[8,6] dynamic-update-slice(a, u, j, i)
  ROOT t = (f32[3,4], f32[8,6]) tuple(ds, dus)
})"},
    {"reductions_rows_columns_whole", R"(
HloModule m
add { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y) }
max { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] maximum(x, y) }
mul { x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT r = s32[] multiply(x, y) }
and { x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT r = pred[] and(x, y) }
ENTRY e {
  a = f32[37,300] parameter(0)
  b = s32[20,3,5] parameter(1)
  p = pred[40,70] parameter(2)
  z = f32[] constant(0)
  ninf = f32[] constant(-inf)
  one = s32[] constant(1)
  t = pred[] constant(true)
  rows = f32[37] reduce(a, z), dimensions={1}, to_apply=add
  cols = f32[300] reduce(a, ninf), dimensions={0}, to_apply=max
  all = f32[] reduce(a, z), dimensions={0,1}, to_apply=add
  mid = s32[20,5] reduce(b, one), dimensions={1}, to_apply=mul
  pa = pred[70] reduce(p, t), dimensions={0}, to_apply=and
  ROOT r = (f32[37], f32[300], f32[], s32[20,5], pred[70]) tuple(rows, cols, all, mid, pa)
})",
     1e-4},
    // Inits are the reducers' identities: XLA lets a backend apply the init
    // value once per partial reduction (the host backend does, per thread).
    {"long_rows_reduce_in_chunks_then_partials", R"(
HloModule m
add { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y) }
max { x = s8[] parameter(0)
  y = s8[] parameter(1)
  ROOT r = s8[] maximum(x, y) }
addi { x = s16[] parameter(0)
  y = s16[] parameter(1)
  ROOT r = s16[] add(x, y) }
ENTRY e {
  a = f32[3,100003] parameter(0)
  b = s8[70000] parameter(1)
  c = s16[2,90000] parameter(2)
  z = f32[] constant(0)
  lo = s8[] constant(-128)
  zi = s16[] constant(0)
  rows = f32[3] reduce(a, z), dimensions={1}, to_apply=add
  all = f32[] reduce(a, z), dimensions={0,1}, to_apply=add
  m = s8[] reduce(b, lo), dimensions={0}, to_apply=max
  w = s16[2] reduce(c, zi), dimensions={1}, to_apply=addi
  ROOT r = (f32[3], f32[], s8[], s16[2]) tuple(rows, all, m, w)
})",
     1e-4},
    {"variadic_reduce_argmax", R"(
HloModule m
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GE
  v = f32[] select(gt, v0, v1)
  i = s32[] select(gt, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  a = f32[16,50] parameter(0)
  idx = s32[16,50] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[16], s32[16]) reduce(a, idx, ninf, zero), dimensions={1}, to_apply=argmax
})"},
    {"dots_plain_transposed_batched_integer", R"(
HloModule m
ENTRY e {
  a = f32[17,33] parameter(0)
  b = f32[33,9] parameter(1)
  c = f32[5,17,33] parameter(2)
  d = f64[6,4] parameter(3)
  i = s64[3,4] parameter(4)
  j = s64[4,2] parameter(5)
  ab = f32[17,9] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tb = f32[9,17] dot(b, a), lhs_contracting_dims={0}, rhs_contracting_dims={1}
  bc = f32[5,17,17] dot(c, c), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  dd = f64[4,4] dot(d, d), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ij = s64[3,2] dot(i, j), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[17,9], f32[9,17], f32[5,17,17], f64[4,4], s64[3,2]) tuple(ab, tb, bc, dd, ij)
})",
     1e-4},
    {"ragged_dots_in_every_mode_through_the_shared_expansion", R"(
HloModule m
ENTRY e {
  l = f32[3,11,5] parameter(0)
  r = f32[4,5,7] parameter(1)
  s = s32[3,4] constant({{2, 0, 5, 3}, {11, 0, 0, 0}, {1, 1, 1, 1}})
  rows = f32[3,11,7] ragged-dot(l, r, s), lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={1}, rhs_group_dims={0}
  c = f32[6,3,5] parameter(2)
  q = f32[3,5,2] parameter(3)
  k = s64[3,3] constant({{1, 2, 2}, {0, 5, 0}, {4, 0, 0}})
  cols = f32[3,6,2] ragged-dot(c, q, k), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, lhs_ragged_dims={2}
  b = f32[5,3,2] parameter(4)
  g = u8[2] constant({1, 2})
  batches = f32[5,3,3] ragged-dot(b, b, g), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={0}
  ROOT t = (f32[3,11,7], f32[3,6,2], f32[5,3,3]) tuple(rows, cols, batches)
})",
     1e-4},
    {"ragged_dot_rows_in_tiles_of_their_groups", R"(
HloModule m
ENTRY e {
  l = f32[300,8] parameter(0)
  r = f32[6,5,8] parameter(1)
  s = s64[6] constant({70, 0, 45, 1, 130, 20})
  ROOT d = f32[300,5] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={2}, lhs_ragged_dims={0}, rhs_group_dims={0}
})",
     1e-4},
    {"ragged_dot_contracted_rows_in_tiles_of_their_groups", R"(
HloModule m
ENTRY e {
  l = f32[6,300] parameter(0)
  r = f32[300,4] parameter(1)
  s = s32[6] constant({70, 0, 45, 1, 130, 20})
  ROOT d = f32[6,6,4] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}
})",
     1e-4},
    {"half_dots_multiply_their_operands_as_they_are", R"(
HloModule m
ENTRY e {
  a = bf16[8,40] parameter(0)
  b = bf16[40,6] parameter(1)
  c = f16[3,7] parameter(2)
  ab = bf16[8,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  cc = f16[7,7] dot(c, c), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT r = (bf16[8,6], f16[7,7]) tuple(ab, cc)
})",
     1e-2},
    {"gather_rows_of_a_table_clamped", R"(
HloModule m
ENTRY e {
  table = f32[50,16] parameter(0)
  ids = s32[20] parameter(1)
  ROOT g = f32[20,16] gather(table, ids), offset_dims={1},
      collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1,
      slice_sizes={1,16}
})"},
    {"gather_two_start_indices_s64_bf16", R"(
HloModule m
ENTRY e {
  a = bf16[7,9,5] parameter(0)
  i = s64[4,3,2] parameter(1)
  ROOT g = bf16[4,3,4,3] gather(a, i), offset_dims={2,3},
      collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=2,
      slice_sizes={1,4,3}
})"},
    {"gather_with_batching_dimensions", R"(
HloModule m
ENTRY e {
  a = f32[3,10,4] parameter(0)
  i = s32[3,5,1] parameter(1)
  ROOT g = f32[3,5,4] gather(a, i), offset_dims={2},
      collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0},
      start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,4}
})"},
    {"gather_u64_index_vectors_first_u8_operand", R"(
HloModule m
ENTRY e {
  a = u8[20,6] parameter(0)
  i = u64[2,7] parameter(1)
  ROOT g = u8[7,3] gather(a, i), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,3}
})"},
    {"scatter_add_rows_in_position_order", R"(
HloModule m
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
ENTRY e {
  o = f32[10,8] parameter(0)
  i = s32[12,1] parameter(1)
  u = f32[12,8] parameter(2)
  ROOT s = f32[10,8] scatter(o, i, u), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=add
})"},
    {"scatter_replace_duplicates_last_wins_s8", R"(
HloModule m
assign { a = s8[] parameter(0)
  ROOT b = s8[] parameter(1) }
ENTRY e {
  o = s8[6,5] parameter(0)
  i = s32[9,2] parameter(1)
  u = s8[9,2] parameter(2)
  ROOT s = s8[6,5] scatter(o, i, u), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1},
      index_vector_dim=1, to_apply=assign
})"},
    {"scatter_variadic_region_keeps_the_minimum_and_its_id", R"(
HloModule m
keep_min {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  v = f32[] select(lt, a, b)
  vi = s32[] select(lt, ai, bi)
  ROOT r = (f32[], s32[]) tuple(v, vi)
}
ENTRY e {
  o = f32[16] parameter(0)
  oi = s32[16] parameter(1)
  i = s32[10,1] parameter(2)
  u = f32[10] parameter(3)
  ui = s32[10] parameter(4)
  ROOT s = (f32[16], s32[16]) scatter(o, oi, i, u, ui), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=keep_min
})"},
    {"scatter_add_bf16_pred_and_batching_dimensions", R"(
HloModule m
addb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b) }
orp { a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT r = pred[] or(a, b) }
addf { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
ENTRY e {
  o = bf16[7] parameter(0)
  i = u64[5,1] parameter(1)
  u = bf16[5] parameter(2)
  p = pred[7] parameter(3)
  up = pred[5] parameter(4)
  f = f32[3,10,4] parameter(5)
  j = s32[3,5,1] parameter(6)
  uf = f32[3,5,4] parameter(7)
  sb = bf16[7] scatter(o, i, u), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=addb
  sp = pred[7] scatter(p, i, up), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=orp
  sf = f32[3,10,4] scatter(f, j, uf), update_window_dims={2},
      inserted_window_dims={1}, input_batching_dims={0},
      scatter_indices_batching_dims={0}, scatter_dims_to_operand_dims={1},
      index_vector_dim=2, to_apply=addf
  ROOT r = (bf16[7], pred[7], f32[3,10,4]) tuple(sb, sp, sf)
})"},
    {"rng_bit_generator_philox_and_three_fry_every_width", R"(
HloModule m
ENTRY e {
  s2 = u64[2] parameter(0)
  s3 = u64[3] parameter(1)
  a = (u64[2], u32[5,7]) rng-bit-generator(s2), algorithm=rng_default
  b = (u64[3], u64[9]) rng-bit-generator(s3), algorithm=rng_philox
  c = (u64[2], u32[3,5]) rng-bit-generator(s2), algorithm=rng_three_fry
  d = (u64[2], u64[4]) rng-bit-generator(s2), algorithm=rng_three_fry
  f = (u64[2], u8[6,3]) rng-bit-generator(s2), algorithm=rng_three_fry
  g = (u64[2], u16[]) rng-bit-generator(s2), algorithm=rng_three_fry
  ROOT r = ((u64[2], u32[5,7]), (u64[3], u64[9]), (u64[2], u32[3,5]),
            (u64[2], u64[4]), (u64[2], u8[6,3]), (u64[2], u16[])) tuple(a, b, c, d, f, g)
})"},
    {"reduce_window_pooling_cumsum_and_dilations", R"(
HloModule m
max { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
addi { a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b) }
addb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b) }
ENTRY e {
  x = f32[2,9,9,3] parameter(0)
  c = s32[10] parameter(1)
  d = f32[5,6] parameter(2)
  h = bf16[40] parameter(3)
  ninf = f32[] constant(-inf)
  zf = f32[] constant(0)
  zi = s32[] constant(0)
  zb = bf16[] constant(0)
  pool = f32[2,5,5,3] reduce-window(x, ninf), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=max
  cum = s32[10] reduce-window(c, zi), window={size=10 pad=9_0}, to_apply=addi
  dil = f32[10,2] reduce-window(d, zf), window={size=2x3 stride=1x2 pad=1_1x0_1 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=add
  sums = bf16[9] reduce-window(h, zb), window={size=8 stride=4}, to_apply=addb
  ROOT r = (f32[2,5,5,3], s32[10], f32[10,2], bf16[9]) tuple(pool, cum, dil, sums)
})",
     1e-5},
    {"reduce_window_variadic_argmax", R"(
HloModule m
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  ge = pred[] compare(v0, v1), direction=GE
  v = f32[] select(ge, v0, v1)
  i = s32[] select(ge, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  a = f32[4,7] parameter(0)
  ids = s32[4,7] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(-1)
  ROOT r = (f32[4,7], s32[4,7]) reduce-window(a, ids, ninf, zero), window={size=1x3 pad=0_0x1_1}, to_apply=argmax
})"},
    {"select_and_scatter_overlapping_padded_windows", R"(
HloModule m
ge { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE }
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
geb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT }
addb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b) }
ENTRY e {
  x = f32[2,9,9,3] parameter(0)
  g = f32[2,5,5,3] parameter(1)
  z = f32[] constant(0)
  y = bf16[11] parameter(2)
  h = bf16[5] parameter(3)
  zb = bf16[] constant(0.5)
  a = f32[2,9,9,3] select-and-scatter(x, g, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, select=ge, scatter=add
  b = bf16[11] select-and-scatter(y, h, zb), window={size=4 stride=2 pad=1_0}, select=geb, scatter=addb
  ROOT r = (f32[2,9,9,3], bf16[11]) tuple(a, b)
})",
     1e-6},
    // Total order, descending: +NaN first, -NaN last, +0 before -0, and
    // ties (ceilings) in their original order (the payload shows it).
    {"sort_total_order_descending_with_nans_zeros_ties_and_a_payload", R"(
HloModule m
gt { a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT g = pred[] compare(a, b), direction=GT, type=TOTALORDER }
ENTRY e {
  a = f32[5,37] parameter(0)
  c = f32[5,37] ceil(a)
  nan = f32[] constant(nan)
  minus_nan = f32[] constant(-nan)
  nans = f32[5,37] broadcast(nan), dimensions={}
  minus_nans = f32[5,37] broadcast(minus_nan), dimensions={}
  t0 = f32[] constant(-1.5)
  t1 = f32[] constant(-2)
  t2 = f32[] constant(2)
  b0 = f32[5,37] broadcast(t0), dimensions={}
  b1 = f32[5,37] broadcast(t1), dimensions={}
  b2 = f32[5,37] broadcast(t2), dimensions={}
  z = f32[] constant(0)
  zeros = f32[5,37] broadcast(z), dimensions={}
  p0 = pred[5,37] compare(a, b0), direction=LT
  p1 = pred[5,37] compare(a, b1), direction=LT
  p2 = pred[5,37] compare(a, b2), direction=GT
  k3 = f32[5,37] select(p0, zeros, c)
  k2 = f32[5,37] select(p1, minus_nans, k3)
  k1 = f32[5,37] select(p2, nans, k2)
  i = s32[5,37] iota(), iota_dimension=1
  ROOT s = (f32[5,37], s32[5,37]) sort(k1, i), dimensions={1}, is_stable=true, to_apply=gt
})"},
    // Any comparator (lexicographic, the second key descending) along a
    // middle dimension: rows are strided.
    {"sort_generic_comparator_along_a_middle_dimension", R"(
HloModule m
cmp { a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  gt2 = pred[] compare(c, d), direction=GT
  both = pred[] and(eq, gt2)
  ROOT r = pred[] or(lt, both) }
ENTRY e {
  a = f32[4,19,3] parameter(0)
  k = f32[4,19,3] floor(a)
  v = s32[4,19,3] parameter(1)
  ROOT s = (f32[4,19,3], s32[4,19,3]) sort(k, v), dimensions={1}, to_apply=cmp
})"},
    {"sort_keys_only_s32_with_many_ties_and_bf16_partial_order", R"(
HloModule m
lt { a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT }
ltb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT }
ENTRY e {
  a = s32[2,1000] parameter(0)
  b = bf16[300] parameter(1)
  s = s32[2,1000] sort(a), dimensions={1}, to_apply=lt
  t = bf16[300] sort(b), dimensions={0}, to_apply=ltb
  ROOT r = (s32[2,1000], bf16[300]) tuple(s, t)
})"},
    {"top_k_largest_and_smallest_with_ties", R"(
HloModule m
ENTRY e {
  a = f32[3,50] parameter(0)
  f = f32[3,50] floor(a)
  big = (f32[3,5], s32[3,5]) topk(f), k=5, largest=true
  small = (f32[3,4], s32[3,4]) topk(f), k=4, largest=false
  b0 = f32[3,5] get-tuple-element(big), index=0
  b1 = s32[3,5] get-tuple-element(big), index=1
  s0 = f32[3,4] get-tuple-element(small), index=0
  s1 = s32[3,4] get-tuple-element(small), index=1
  ROOT r = (f32[3,5], s32[3,5], f32[3,4], s32[3,4]) tuple(b0, b1, s0, s1)
})"},
    // A loop whose state is a counter, an accumulator (swapped with its
    // spare each iteration) and an operand the body passes through.
    {"while_accumulates_with_a_passed_through_operand", R"(
HloModule m
cond { p = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT }
body { p = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = f32[64] get-tuple-element(p), index=1
  x = f32[64] get-tuple-element(p), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  half = f32[] constant(0.5)
  halves = f32[64] broadcast(half), dimensions={}
  scaled = f32[64] multiply(acc, halves)
  sum = f32[64] add(scaled, x)
  ROOT t = (s32[], f32[64], f32[64]) tuple(j, sum, x) }
ENTRY e {
  x = f32[64] parameter(0)
  a = f32[64] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[64], f32[64]) tuple(zero, a, x)
  w = (s32[], f32[64], f32[64]) while(init), condition=cond, body=body
  count = s32[] get-tuple-element(w), index=0
  acc = f32[64] get-tuple-element(w), index=1
  ROOT r = (s32[], f32[64]) tuple(count, acc)
})",
     1e-5},
    // Branches chosen by a pred and by an index (in range, and out of
    // range: the last), one of them a loop.
    {"conditionals_by_pred_and_by_index_with_a_loop_in_a_branch", R"(
HloModule m
neg { p = f32[32] parameter(0)
  ROOT n = f32[32] negate(p) }
ex { p = f32[32] parameter(0)
  ROOT e = f32[32] exponential(p) }
cond { p = (s32[], f32[32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT }
body { p = (s32[], f32[32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[32] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  d = f32[32] add(v, v)
  ROOT t = (s32[], f32[32]) tuple(j, d) }
looped { p = f32[32] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[32]) tuple(zero, p)
  w = (s32[], f32[32]) while(init), condition=cond, body=body
  ROOT v = f32[32] get-tuple-element(w), index=1 }
ENTRY e {
  x = f32[32] parameter(0)
  y = f32[] parameter(1)
  z = f32[] constant(0)
  positive = pred[] compare(y, z), direction=GT
  by_pred = f32[32] conditional(positive, x, x), true_computation=neg, false_computation=ex
  one = s32[] constant(1)
  by_index = f32[32] conditional(one, x, x, x), branch_computations={neg, looped, ex}
  seven = s32[] constant(7)
  out_of_range = f32[32] conditional(seven, x, x, x), branch_computations={neg, looped, ex}
  ROOT r = (f32[32], f32[32], f32[32]) tuple(by_pred, by_index, out_of_range)
})",
     1e-5},
    // NHWC, 3x3, stride 2, padding (one side negative), into bf16.
    {"convolution_nhwc_strided_padded_into_bf16", R"(
HloModule m
ENTRY e {
  a = f32[2,9,8,3] parameter(0)
  w = f32[3,3,3,5] parameter(1)
  c = f32[2,5,3,5] convolution(a, w), window={size=3x3 stride=2x2 pad=1_1x1_-1}, dim_labels=b01f_01io->b01f
  h = bf16[2,5,3,5] convolution(a, w), window={size=3x3 stride=2x2 pad=1_1x1_-1}, dim_labels=b01f_01io->b01f
  ROOT r = (f32[2,5,3,5], bf16[2,5,3,5]) tuple(c, h)
})",
     1e-2},
    // Feature groups, both dilations and a reversed window, in permuted
    // layouts.
    {"convolution_feature_groups_dilations_reversal_permuted_layouts", R"(
HloModule m
ENTRY e {
  a = f32[2,4,7,6] parameter(0)
  w = f32[6,2,3,2] parameter(1)
  ROOT c = f32[2,6,9,7] convolution(a, w), window={size=2x3 pad=1_1x0_0 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=1x0}, dim_labels=bf01_o01i->bf10, feature_group_count=2
})",
     1e-5},
    // Batch groups (a weight gradient's shape), and integers summed exactly.
    {"convolution_batch_groups_and_integers", R"(
HloModule m
ENTRY e {
  a = f32[4,6,6,2] parameter(0)
  w = f32[2,5,5,2] parameter(1)
  g = f32[2,2,2,2] convolution(a, w), window={size=5x5}, dim_labels=b01f_i01o->b01f, batch_group_count=2
  x = s8[1,5,5,2] parameter(2)
  y = s8[3,3,2,4] parameter(3)
  i = s32[1,3,3,4] convolution(x, y), window={size=3x3}, dim_labels=b01f_01io->b01f
  ROOT r = (f32[2,2,2,2], s32[1,3,3,4]) tuple(g, i)
})",
     1e-5},
    // Convolutions cuDNN takes (run here as cuDNN computes the problem
    // CudnnConvFor describes): NHWC 3x3 in every float type cuDNN has.
    {"cudnn_convolution_nhwc_3x3_every_float_type", R"(
HloModule m
ENTRY e {
  a = f32[2,7,6,5] parameter(0)
  w = f32[3,3,5,4] parameter(1)
  c = f32[2,7,6,4] convolution(a, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ab = bf16[2,7,6,5] convert(a)
  wb = bf16[3,3,5,4] convert(w)
  cb = bf16[2,7,6,4] convolution(ab, wb), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ah = f16[2,7,6,5] convert(a)
  wh = f16[3,3,5,4] convert(w)
  ch = f16[2,7,6,4] convolution(ah, wh), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ad = f64[2,7,6,5] convert(a)
  wd = f64[3,3,5,4] convert(w)
  cd = f64[2,7,6,4] convolution(ad, wd), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT r = (f32[2,7,6,4], bf16[2,7,6,4], f16[2,7,6,4], f64[2,7,6,4]) tuple(c, cb, ch, cd)
})",
     1e-2},
    // NCHW with feature groups, strides, window dilation and uneven
    // padding; a depthwise one; a reversed window; filters in layouts
    // that cuDNN reads from a transposed copy.
    {"cudnn_convolution_groups_strides_dilation_reversal_layouts", R"(
HloModule m
ENTRY e {
  a = f32[2,6,9,8] parameter(0)
  w = f32[4,3,3,2] parameter(1)
  g = f32[2,4,4,3] convolution(a, w), window={size=3x2 stride=2x3 pad=1_0x0_2 rhs_dilate=1x2}, dim_labels=bf01_oi01->bf01, feature_group_count=2
  d = f32[3,3,1,6] parameter(2)
  dw = f32[2,6,9,8] convolution(a, d), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_01io->bf01, feature_group_count=6
  k = f32[3,2,6,5] parameter(3)
  rv = f32[2,5,7,8] convolution(a, k), window={size=3x2 pad=0_0x1_0 rhs_reversal=1x1}, dim_labels=bf01_01io->bf01
  ROOT r = (f32[2,4,4,3], f32[2,6,9,8], f32[2,5,7,8]) tuple(g, dw, rv)
})",
     1e-5},
    // One spatial dimension (a unit one added) and three.
    {"cudnn_convolution_1d_and_3d", R"(
HloModule m
ENTRY e {
  a = f32[3,17,4] parameter(0)
  w = f32[5,4,6] parameter(1)
  c1 = f32[3,8,6] convolution(a, w), window={size=5 stride=2 pad=2_1}, dim_labels=b0f_0io->b0f
  v = f32[2,3,5,6,4] parameter(2)
  k = f32[2,3,2,7,3] parameter(3)
  c3 = f32[2,7,4,5,3] convolution(v, k), window={size=2x3x2 pad=0_0x1_0x0_1 rhs_dilate=1x1x2}, dim_labels=bf012_012oi->bf012
  ROOT r = (f32[3,8,6], f32[2,7,4,5,3]) tuple(c1, c3)
})",
     1e-5},
    // Base (lhs) dilation: cuDNN's backward-data convolution (JAX's input
    // gradient of a strided convolution), reversed or not, padded past
    // the dilated edges or inside them, one and two spatial dimensions.
    {"cudnn_convolution_backward_data_of_strided", R"(
HloModule m
ENTRY e {
  a = f32[2,4,5,3] parameter(0)
  w = f32[3,3,3,6] parameter(1)
  t = f32[2,9,11,6] convolution(a, w), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  r = f32[2,8,6,6] convolution(a, w), window={size=3x3 pad=1_2x0_1 lhs_dilate=2x2 rhs_dilate=1x2 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f
  b = bf16[2,4,5,3] convert(a)
  wb = bf16[3,3,3,6] convert(w)
  tb = bf16[2,9,11,6] convolution(b, wb), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  n = f32[2,3,7] parameter(2)
  k = f32[4,3,3] parameter(3)
  o = f32[2,4,19] convolution(n, k), window={size=3 pad=1_1 lhs_dilate=3}, dim_labels=bf0_oi0->bf0
  ROOT out = (f32[2,9,11,6], f32[2,8,6,6], bf16[2,9,11,6], f32[2,4,19]) tuple(t, r, tb, o)
})",
     1e-2},
    // Filter gradients as JAX writes them for NHWC activations (HWIO out:
    // cuDNN's backward filter into a packed temporary, copied out), and
    // one of NCHW activations whose OIHW gradient cuDNN writes in place.
    {"cudnn_convolution_backward_filter", R"(
HloModule m
ENTRY e {
  x = f32[2,7,6,5] parameter(0)
  dy = f32[2,4,3,4] parameter(1)
  dw = f32[3,3,5,4] convolution(x, dy), window={size=4x3 pad=1_1x1_0 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf
  xb = bf16[2,7,6,5] convert(x)
  dyb = bf16[2,4,3,4] convert(dy)
  dwb = bf16[3,3,5,4] convolution(xb, dyb), window={size=4x3 pad=1_1x1_0 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf
  xn = f32[3,2,6,5] parameter(2)
  dyn = f32[3,4,4,3] parameter(3)
  dwn = f32[4,2,3,3] convolution(xn, dyn), window={size=4x3 pad=0_0x0_0}, dim_labels=fb01_io01->fb01
  ROOT r = (f32[3,3,5,4], bf16[3,3,5,4], f32[4,2,3,3]) tuple(dw, dwb, dwn)
})",
     1e-2},
    // bf16 and f16 operands summed into f32 (preferred_element_type): cuDNN
    // in f32 on widened copies, in each direction.
    {"cudnn_convolution_bf16_and_f16_into_f32", R"(
HloModule m
ENTRY e {
  a = bf16[2,7,6,5] parameter(0)
  w = bf16[3,3,5,4] parameter(1)
  c = f32[2,7,6,4] convolution(a, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  h = f16[2,4,5,3] parameter(2)
  k = f16[3,3,3,6] parameter(3)
  t = f32[2,9,11,6] convolution(h, k), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  x = bf16[2,7,6,5] parameter(4)
  dy = bf16[2,4,3,4] parameter(5)
  dw = f32[3,3,5,4] convolution(x, dy), window={size=4x3 pad=1_1x1_0 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf
  ROOT r = (f32[2,7,6,4], f32[2,9,11,6], f32[3,3,5,4]) tuple(c, t, dw)
})",
     1e-4},
    // rng in every distribution and kind of type, and the state op: the
    // host's draws under the same key.
    {"rng_uniform_normal_integer_and_state", R"(
HloModule m
ENTRY e {
  a = f32[] parameter(0)
  one = f32[] constant(1)
  b = f32[] add(a, one)
  u = f32[37] rng(a, b), distribution=rng_uniform
  h0 = f16[] constant(-2)
  h1 = f16[] constant(2)
  uh = f16[9] rng(h0, h1), distribution=rng_uniform
  m = f64[] constant(0.5)
  sd = f64[] constant(2)
  n = f64[11] rng(m, sd), distribution=rng_normal
  i0 = s32[] constant(-5)
  i1 = s32[] constant(1000)
  i = s32[21] rng(i0, i1), distribution=rng_uniform
  s = u64[2] rng-get-and-update-state(), delta=7
  q0 = f8e4m3fn[] constant(-1)
  q1 = f8e4m3fn[] constant(0)
  uq = f8e4m3fn[3000] rng(q0, q1), distribution=rng_uniform
  b0 = bf16[] constant(2)
  b1 = bf16[] constant(5)
  ub = bf16[2000] rng(b0, b1), distribution=rng_uniform
  ud = f64[13] rng(m, sd), distribution=rng_uniform
  e0 = f8e8m0fnu[] constant(1)
  e1 = f8e8m0fnu[] constant(8)
  ue = f8e8m0fnu[500] rng(e0, e1), distribution=rng_uniform
  k0 = f4e2m1fn[] constant(-1)
  k1 = f4e2m1fn[] constant(0)
  uk = f4e2m1fn[500] rng(k0, k1), distribution=rng_uniform
  x0 = f6e3m2fn[] constant(0)
  x1 = f6e3m2fn[] constant(2)
  ux = f6e3m2fn[500] rng(x0, x1), distribution=rng_uniform
  ROOT r = (f32[37], f16[9], f64[11], s32[21], u64[2], f8e4m3fn[3000],
            bf16[2000], f64[13], f8e8m0fnu[500], f4e2m1fn[500],
            f6e3m2fn[500]) tuple(u, uh, n, i, s, uq, ub, ud, ue, uk, ux)
})"},
    {"map_of_a_two_operand_region", R"(
HloModule m
f { a = f32[] parameter(0)
  b = bf16[] parameter(1)
  bf = f32[] convert(b)
  p = f32[] multiply(a, bf)
  ROOT r = f32[] tanh(p) }
ENTRY e {
  x = f32[6,7] parameter(0)
  y = bf16[6,7] parameter(1)
  ROOT m = f32[6,7] map(x, y), dimensions={0,1}, to_apply=f
})",
     1e-5},
    {"f8_element_wise_converts_and_sums", R"(
HloModule m
add8 { a = f8e5m2[] parameter(0)
  b = f8e5m2[] parameter(1)
  ROOT r = f8e5m2[] add(a, b) }
ENTRY e {
  a = f8e4m3fn[6,9] parameter(0)
  b = f8e4m3fn[6,9] parameter(1)
  c = f8e5m2[6,9] parameter(2)
  x = f32[6,9] parameter(3)
  m = f8e4m3fn[6,9] multiply(a, b)
  s = f8e4m3fn[6,9] add(m, a)
  t = f8e4m3fn[9,6] transpose(s), dimensions={1,0}
  xa = f8e4m3fn[6,9] convert(x)
  xc = f8e5m2[6,9] convert(x)
  big = f32[6,9] multiply(x, x)
  ov = f8e4m3fn[6,9] convert(big)
  cf = f32[6,9] convert(c)
  ac = f8e5m2[6,9] convert(a)
  mx = f8e5m2[6,9] maximum(c, ac)
  z = f8e5m2[] constant(0)
  r = f8e5m2[6] reduce(c, z), dimensions={1}, to_apply=add8
  lt = pred[6,9] compare(a, b), direction=LT
  ROOT o = (f8e4m3fn[9,6], f8e4m3fn[6,9], f8e5m2[6,9], f8e4m3fn[6,9], f32[6,9],
            f8e5m2[6,9], f8e5m2[6], pred[6,9]) tuple(t, xa, xc, ov, cf, mx, r, lt)
})",
     0},
    {"f8_formats_with_infinities_and_unsigned_zeros", R"(
HloModule m
ENTRY e {
  x = f32[6,9] parameter(0)
  y = f32[6,9] parameter(1)
  big = f32[6,9] multiply(x, x)
  tiny = f32[6,9] multiply(y, f32[6,9] broadcast(f32[] constant(-0.001)))
  a = f8e4m3[6,9] convert(big)
  b = f8e3m4[6,9] convert(x)
  c = f8e4m3fnuz[6,9] convert(tiny)
  d = f8e5m2fnuz[6,9] convert(big)
  e = f8e4m3b11fnuz[6,9] convert(x)
  s = f8e3m4[6,9] add(b, b)
  m = f8e4m3fnuz[6,9] multiply(c, c)
  n = f8e4m3b11fnuz[6,9] negate(e)
  back = f32[6,9] convert(d)
  ROOT o = (f8e4m3[6,9], f8e3m4[6,9], f8e4m3fnuz[6,9], f8e5m2fnuz[6,9],
            f8e4m3b11fnuz[6,9], f8e3m4[6,9], f8e4m3fnuz[6,9], f8e4m3b11fnuz[6,9],
            f32[6,9]) tuple(a, b, c, d, e, s, m, n, back)
})",
     0},
    {"microscaling_formats_saturate_pack_and_scale", R"(
HloModule m
ENTRY e {
  x = f32[6,9] parameter(0)
  y = f32[6,9] parameter(1)
  big = f32[6,9] multiply(x, x)
  a = f4e2m1fn[6,9] convert(x)
  b = f6e2m3fn[6,9] convert(big)
  c = f6e3m2fn[6,9] convert(y)
  s = f8e8m0fnu[6,9] convert(big)
  p = f4e2m1fn[6,9] add(a, a)
  m = f6e3m2fn[6,9] multiply(c, c)
  n = f6e2m3fn[6,9] negate(b)
  scaled = f32[6,9] multiply(f32[6,9] convert(a), f32[6,9] convert(s))
  lt = pred[6,9] compare(a, f4e2m1fn[6,9] convert(y)), direction=LT
  ROOT o = (f4e2m1fn[6,9], f6e2m3fn[6,9], f6e3m2fn[6,9], f8e8m0fnu[6,9],
            f4e2m1fn[6,9], f6e3m2fn[6,9], f6e2m3fn[6,9], f32[6,9],
            pred[6,9]) tuple(a, b, c, s, p, m, n, scaled, lt)
})",
     0},
    {"two_bit_integers_wrap_shift_and_pack_four_per_byte", R"(
HloModule m
ENTRY e {
  a = s2[7,5] parameter(0)
  b = s2[7,5] parameter(1)
  u = u2[7,5] parameter(2)
  x = f32[7,5] parameter(3)
  s = s2[7,5] add(a, b)
  m = s2[7,5] multiply(s, b)
  one = s2[7,5] broadcast(s2[] constant(1)), dimensions={}
  sl = s2[7,5] shift-right-logical(a, one)
  sa = u2[7,5] shift-right-arithmetic(u, u2[7,5] convert(one))
  pc = s2[7,5] popcnt(a)
  cz = u2[7,5] count-leading-zeros(u)
  f = s2[7,5] convert(x)
  w = s32[7,5] convert(m)
  t = u2[5,7] transpose(u), dimensions={1,0}
  ROOT o = (s2[7,5], s2[7,5], u2[7,5], s2[7,5], u2[7,5], s2[7,5], s32[7,5],
            u2[5,7]) tuple(m, sl, sa, pc, cz, f, w, t)
})",
     0},
    {"complex_moves_and_component_wise_ops", R"(
HloModule m
ENTRY e {
  a = c64[5,3] parameter(0)
  b = c64[5,3] parameter(1)
  w = c128[3,5] parameter(2)
  k = c64[5,3] constant({{(1, 2), (-inf, nan), (0, -0)}, {(3, 4), (1, 2), (nan, 1)},
                         {(0, 0), (5, -5), (1e30, 1e-30)}, {(2, 2), (2, 2), (2, 2)},
                         {(-1, -1), (1, 1), (inf, -inf)}})
  s = c64[5,3] add(a, k)
  d = c64[5,3] subtract(s, b)
  n = c64[5,3] negate(d)
  eq = pred[5,3] compare(a, k), direction=EQ
  ne = pred[5,3] compare(k, k), direction=NE
  sel = c64[5,3] select(eq, a, n)
  re = f32[5,3] real(sel)
  im = f32[5,3] imag(k)
  c = c64[5,3] complex(im, re)
  t = c128[5,3] transpose(w), dimensions={1,0}
  tr = f64[5,3] real(t)
  ROOT o = (c64[5,3], pred[5,3], pred[5,3], f32[5,3], c64[5,3], c128[5,3], f64[5,3])
           tuple(n, eq, ne, re, c, t, tr)
})",
     0},
    {"complex_sort_scatter_windows_and_map", R"(
HloModule m
lex {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ra = f32[] real(a)
  rb = f32[] real(b)
  ia = f32[] imag(a)
  ib = f32[] imag(b)
  lt = pred[] compare(ra, rb), direction=LT
  eq = pred[] compare(ra, rb), direction=EQ
  lti = pred[] compare(ia, ib), direction=LT
  tie = pred[] and(eq, lti)
  ROOT r = pred[] or(lt, tie)
}
mul {
  p = c128[] parameter(0)
  q = c128[] parameter(1)
  m = c128[] multiply(p, q)
  ROOT r = c128[] subtract(m, q)
}
add {
  p = c64[] parameter(0)
  q = c64[] parameter(1)
  ROOT s = c64[] add(p, q)
}
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}
f {
  a = c128[] parameter(0)
  b = c128[] parameter(1)
  m = c128[] multiply(a, b)
  e = c128[] exponential(a)
  ROOT r = c128[] add(m, e)
}
ENTRY e {
  x = c64[3,17] parameter(0)
  y = c128[6] parameter(1)
  u = c128[5] parameter(2)
  w = f32[4,6] parameter(3)
  g = c64[2,3] parameter(4)
  io = s32[3,17] iota(), iota_dimension=1
  s = (c64[3,17], s32[3,17]) sort(x, io), dimensions={1}, is_stable=true,
      to_apply=lex
  ix = s32[5,1] constant({{2}, {5}, {2}, {0}, {2}})
  sc = c128[6] scatter(y, ix, u), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=mul
  z = c64[] constant((0, 0))
  cs = c64[3,17] reduce-window(x, z), window={size=1x17 pad=0_0x16_0},
      to_apply=add
  sas = c64[4,6] select-and-scatter(w, g, z), window={size=2x2 stride=2x2},
      select=ge, scatter=add
  mp = c128[6] map(y, y), dimensions={0}, to_apply=f
  sk = c64[3,17] get-tuple-element(s), index=0
  si = s32[3,17] get-tuple-element(s), index=1
  ROOT o = (c64[3,17], s32[3,17], c128[6], c64[3,17], c64[4,6], c128[6])
           tuple(sk, si, sc, cs, sas, mp)
})",
     1e-5},
    {"complex_convolutions", R"(
HloModule m
ENTRY e {
  x = c64[2,10,3] parameter(0)
  k = c64[4,3,5] parameter(1)
  y = c128[1,4,5,6] parameter(2)
  w = c128[4,2,2,3] parameter(3)
  c = c64[2,7,5] convolution(x, k), window={size=4}, dim_labels=b0f_0io->b0f
  d = c128[1,4,3,3] convolution(y, w),
      window={size=2x3 stride=2x2 pad=1_0x1_1 rhs_reversal=0x1},
      dim_labels=bf01_oi01->bf01, feature_group_count=2
  ROOT o = (c64[2,7,5], c128[1,4,3,3]) tuple(c, d)
})",
     1e-5},
    {"complex_arithmetic_and_functions", R"(
HloModule m
ENTRY e {
  a = c64[6,5] parameter(0)
  b = c64[6,5] parameter(1)
  k = c64[6,5] constant({{(1, 2), (0, 0), (-2, 0.5), (3, -1), (0, 1)},
                         {(0, 0), (1, 0), (-1, -0), (2, 2), (0.25, -4)},
                         {(1e-3, 2e-3), (-3, 3), (0.5, 0.5), (1, 1), (-1, 0)},
                         {(4, 0), (0, -4), (2, -3), (-0.5, 1.5), (7, 7)},
                         {(1, 1), (1, -1), (-1, 1), (-1, -1), (0.1, 0)},
                         {(3, 4), (-3, 4), (3, -4), (-3, -4), (0, 5)}})
  m = c64[6,5] multiply(a, b)
  d = c64[6,5] divide(a, b)
  dk = c64[6,5] divide(k, a)
  e = c64[6,5] exponential(a)
  em = c64[6,5] exponential-minus-one(a)
  l = c64[6,5] log(a)
  lp = c64[6,5] log-plus-one(a)
  q = c64[6,5] sqrt(a)
  qk = c64[6,5] sqrt(k)
  r = c64[6,5] rsqrt(a)
  th = c64[6,5] tanh(a)
  lg = c64[6,5] logistic(a)
  sn = c64[6,5] sine(a)
  cs = c64[6,5] cosine(a)
  tn = c64[6,5] tan(a)
  sg = c64[6,5] sign(k)
  p = c64[6,5] power(a, b)
  pk = c64[6,5] power(k, k)
  ab = f32[6,5] abs(a)
  ng = c64[6,5] negate(m)
  cb = c64[6,5] cbrt(a)
  cbk = c64[6,5] cbrt(k)
  at = c64[6,5] atan2(a, b)
  atk = c64[6,5] atan2(k, a)
  ROOT o = (c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5],
            c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5],
            c64[6,5], c64[6,5], c64[6,5], c64[6,5], f32[6,5], c64[6,5], c64[6,5],
            c64[6,5], c64[6,5], c64[6,5])
           tuple(m, d, dk, e, em, l, lp, q, qk, r, th, lg, sn, cs, tn, sg, p, pk, ab, ng,
                 cb, cbk, at, atk)
})",
     1e-5},
    {"int4_arithmetic_packing_and_converts", R"(
HloModule m
add4 {
  x = s4[] parameter(0)
  y = s4[] parameter(1)
  ROOT s = s4[] add(x, y)
}
ENTRY e {
  a = s4[7,5] parameter(0)
  b = s4[7,5] parameter(1)
  u = u4[7,5] parameter(2)
  v = u4[7,5] parameter(3)
  f = f32[7,5] parameter(4)
  s = s4[7,5] add(a, b)
  m = s4[7,5] multiply(a, b)
  d = s4[7,5] divide(a, b)
  r = s4[7,5] remainder(a, b)
  n = s4[7,5] negate(a)
  ab = s4[7,5] abs(a)
  sl = s4[7,5] shift-left(a, b)
  sr = s4[7,5] shift-right-logical(a, b)
  sa = u4[7,5] shift-right-arithmetic(u, v)
  pc = s4[7,5] popcnt(a)
  cz = u4[7,5] count-leading-zeros(u)
  us = u4[7,5] subtract(u, v)
  big = f32[7,5] multiply(f, f)
  fs = s4[7,5] convert(big)
  fu = u4[7,5] convert(big)
  wide = s32[7,5] convert(a)
  w100 = s32[7,5] multiply(wide, wide)
  back = s4[7,5] convert(w100)
  uf = f32[7,5] convert(u)
  lt = pred[7,5] compare(a, b), direction=LT
  z = s4[] constant(0)
  sum = s4[7] reduce(a, z), dimensions={1}, to_apply=add4
  t = s4[5,7] transpose(a), dimensions={1,0}
  ROOT o = (s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5],
            u4[7,5], s4[7,5], u4[7,5], u4[7,5], s4[7,5], u4[7,5], s4[7,5], f32[7,5],
            pred[7,5], s4[7], s4[5,7])
           tuple(s, m, d, r, n, ab, sl, sr, sa, pc, cz, us, fs, fu, back, uf, lt, sum, t)
})"},
    {"complex_infinities_and_nans_as_annex_g", R"(
HloModule m
ENTRY e {
  p = pred[] parameter(0)
  pb = pred[10] broadcast(p), dimensions={}
  k1 = c64[10] constant({(inf, 0), (inf, inf), (nan, inf), (1, 2), (0, 0), (inf, 1),
                         (-inf, nan), (3, 4), (1e30, 1e30), (nan, nan)})
  k2 = c64[10] constant({(1, 0), (0, 1), (2, 3), (0, 0), (0, 0), (inf, inf),
                         (1, 1), (inf, 0), (1e30, -1e30), (1, 0)})
  x = c64[10] select(pb, k1, k2)
  y = c64[10] select(pb, k2, k1)
  m = c64[10] multiply(x, y)
  d = c64[10] divide(x, y)
  e = c64[10] exponential(x)
  ROOT o = (c64[10], c64[10], c64[10]) tuple(m, d, e)
})",
     1e-6},
    {"complex128_functions_converts_reduce_and_dot", R"(
HloModule m
addc {
  x = c128[] parameter(0)
  y = c128[] parameter(1)
  ROOT s = c128[] add(x, y)
}
mulc {
  x = c64[] parameter(0)
  y = c64[] parameter(1)
  ROOT s = c64[] multiply(x, y)
}
ENTRY e {
  a = c128[4,7] parameter(0)
  b = c128[7,3] parameter(1)
  f = f32[4,7] parameter(2)
  h = f16[4,7] parameter(3)
  i = s32[4,7] parameter(4)
  x = c64[4,7] parameter(5)
  e = c128[4,7] exponential(a)
  l = c128[4,7] log(a)
  q = c128[4,7] sqrt(a)
  t = c128[4,7] tan(a)
  d = c128[4,7] divide(e, a)
  dot = c128[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = c128[] constant((0, 0))
  sum = c128[4] reduce(a, z), dimensions={1}, to_apply=addc
  one = c64[] constant((1, 0))
  prod = c64[7] reduce(x, one), dimensions={0}, to_apply=mulc
  fc = c64[4,7] convert(f)
  hc = c128[4,7] convert(h)
  ic = c64[4,7] convert(i)
  narrow = c64[4,7] convert(a)
  wide = c128[4,7] convert(x)
  cf = f32[4,7] convert(x)
  ch = f16[4,7] convert(a)
  ci = s32[4,7] convert(x)
  cp = pred[4,7] convert(x)
  cb = c128[4,7] cbrt(a)
  at = c128[4,7] atan2(a, e)
  ROOT o = (c128[4,7], c128[4,7], c128[4,7], c128[4,7], c128[4,7], c128[4,3], c128[4],
            c64[7], c64[4,7], c128[4,7], c64[4,7], c64[4,7], c128[4,7], f32[4,7],
            f16[4,7], s32[4,7], pred[4,7], c128[4,7], c128[4,7])
           tuple(e, l, q, t, d, dot, sum, prod, fc, hc, ic, narrow, wide, cf, ch, ci, cp,
                 cb, at)
})",
     1e-9},
    {"fft_every_type_in_one_to_three_dimensions", R"(
HloModule m
ENTRY e {
  a = c64[3,4,6] parameter(0)
  r = f32[2,6,5] parameter(1)
  h = c64[2,6,3] parameter(2)
  w = c128[2,3,4,5] parameter(3)
  x = f64[4,9] parameter(4)
  f1 = c64[3,4,6] fft(a), fft_type=FFT, fft_length={6}
  f2 = c64[3,4,6] fft(a), fft_type=IFFT, fft_length={4,6}
  f3 = c64[2,6,3] fft(r), fft_type=RFFT, fft_length={6,5}
  f4 = f32[2,6,4] fft(h), fft_type=IRFFT, fft_length={6,4}
  f5 = c128[2,3,4,5] fft(w), fft_type=FFT, fft_length={3,4,5}
  f6 = c128[4,5] fft(x), fft_type=RFFT, fft_length={9}
  f7 = f64[4,9] fft(f6), fft_type=IRFFT, fft_length={9}
  ROOT o = (c64[3,4,6], c64[3,4,6], c64[2,6,3], f32[2,6,4], c128[2,3,4,5], c128[4,5], f64[4,9])
           tuple(f1, f2, f3, f4, f5, f6, f7)
})",
     1e-4},
    {"complex_data_movement", R"(
HloModule m
ENTRY e {
  a = c128[4,3] parameter(0)
  i = s32[] constant(1)
  s = c128[2,3] slice(a), slice={[1:3], [0:3]}
  c = c128[6,3] concatenate(a, s), dimensions={0}
  z = c128[] constant((1, -1))
  p = c128[8,5] pad(c, z), padding=1_1x1_1
  b = c128[2,4,3] broadcast(a), dimensions={1,2}
  r = c128[4,3] reverse(a), dimensions={0}
  rs = c128[12] reshape(r)
  zero = s32[] constant(0)
  ds = c128[2,3] dynamic-slice(a, i, zero), dynamic_slice_sizes={2,3}
  dus = c128[4,3] dynamic-update-slice(a, ds, zero, zero)
  idx = s32[2,1] constant({{3}, {0}})
  g = c128[2,3] gather(a, idx), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  ROOT o = (c128[8,5], c128[2,4,3], c128[12], c128[2,3], c128[4,3], c128[2,3])
           tuple(p, b, rs, ds, dus, g)
})",
     0},
    {"triangular_solve_every_side_triangle_and_transpose", R"(
HloModule m
ENTRY e {
  a = f32[2,4,4] parameter(0)
  b = f32[2,4,3] parameter(1)
  c = f32[2,3,4] parameter(2)
  z = c64[4,4] parameter(3)
  w = c64[4,2] parameter(4)
  i0 = s32[2,4,4] iota(), iota_dimension=1
  i1 = s32[2,4,4] iota(), iota_dimension=2
  eq = pred[2,4,4] compare(i0, i1), direction=EQ
  eight = f32[] constant(8)
  eights = f32[2,4,4] broadcast(eight), dimensions={}
  zero = f32[] constant(0)
  zeros = f32[2,4,4] broadcast(zero), dimensions={}
  d = f32[2,4,4] select(eq, eights, zeros)
  ad = f32[2,4,4] add(a, d)
  t1 = f32[2,4,3] triangular-solve(ad, b), left_side=true, lower=true,
       transpose_a=NO_TRANSPOSE
  t2 = f32[2,3,4] triangular-solve(ad, c), lower=false, transpose_a=TRANSPOSE
  t3 = f32[2,4,3] triangular-solve(ad, b), left_side=true, lower=false,
       unit_diagonal=true, transpose_a=TRANSPOSE
  t4 = f32[2,3,4] triangular-solve(ad, c), lower=true
  zd = c64[4,4] constant({{(8,0), (0,0), (0,0), (0,0)}, {(0,0), (8,1), (0,0),
       (0,0)}, {(0,0), (0,0), (8,0), (0,0)}, {(0,0), (0,0), (0,0), (8,-1)}})
  za = c64[4,4] add(z, zd)
  t5 = c64[4,2] triangular-solve(za, w), left_side=true, lower=true,
       transpose_a=ADJOINT
  ROOT r = (f32[2,4,3], f32[2,3,4], f32[2,4,3], f32[2,3,4], c64[4,2])
           tuple(t1, t2, t3, t4, t5)
})",
     1e-4},
    {"cholesky_lower_and_upper_real_and_complex", R"(
HloModule m
ENTRY e {
  a = f64[3,5,5] parameter(0)
  z = c64[5,5] parameter(1)
  aat = f64[3,5,5] dot(a, a), lhs_batch_dims={0}, lhs_contracting_dims={2},
        rhs_batch_dims={0}, rhs_contracting_dims={2}
  i0 = s32[3,5,5] iota(), iota_dimension=1
  i1 = s32[3,5,5] iota(), iota_dimension=2
  eq = pred[3,5,5] compare(i0, i1), direction=EQ
  five = f64[] constant(5)
  fives = f64[3,5,5] broadcast(five), dimensions={}
  zero = f64[] constant(0)
  zeros = f64[3,5,5] broadcast(zero), dimensions={}
  d = f64[3,5,5] select(eq, fives, zeros)
  spd = f64[3,5,5] add(aat, d)
  l = f64[3,5,5] cholesky(spd), lower=true
  u = f64[3,5,5] cholesky(spd), lower=false
  re = f32[5,5] real(z)
  im = f32[5,5] imag(z)
  nim = f32[5,5] negate(im)
  zc = c64[5,5] complex(re, nim)
  zzh = c64[5,5] dot(z, zc), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  zd = c64[5,5] constant({{(20,0), (0,0), (0,0), (0,0), (0,0)}, {(0,0), (20,0),
       (0,0), (0,0), (0,0)}, {(0,0), (0,0), (20,0), (0,0), (0,0)}, {(0,0),
       (0,0), (0,0), (20,0), (0,0)}, {(0,0), (0,0), (0,0), (0,0), (20,0)}})
  hpd = c64[5,5] add(zzh, zd)
  lc = c64[5,5] cholesky(hpd), lower=true
  uc = c64[5,5] cholesky(hpd), lower=false
  ROOT r = (f64[3,5,5], f64[3,5,5], c64[5,5], c64[5,5]) tuple(l, u, lc, uc)
})",
     1e-4},
    {"bitcast_convert_across_widths_views_the_bytes", R"(
HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  y = u16[5,2] parameter(1)
  z = c64[3] parameter(2)
  b = u8[3,4] bitcast-convert(x)
  g = f32[5] bitcast-convert(y)
  f = f32[3,2] bitcast-convert(z)
  nb = u8[3,4] negate(b)
  ng = f32[5] negate(g)
  ROOT r = (u8[3,4], f32[5], f32[3,2], u8[3,4], f32[5])
           tuple(b, g, f, nb, ng)
})",
     0},
    {"replica_id_and_constants", R"(
HloModule m
ENTRY e {
  a = u32[4] parameter(0)
  r = u32[] replica-id()
  rb = u32[4] broadcast(r), dimensions={}
  k = u32[4] constant({1, 2, 3, 4})
  s = u32[4] add(a, rb)
  ROOT m = u32[4] multiply(s, k)
})"},
};

class CudaCodegen : public ::testing::TestWithParam<Case> {};

TEST_P(CudaCodegen, GeneratedKernelsMatchTheHostBackend) {
  int cudnn = 0;
  CheckAgainstHost(GetParam(), &cudnn);
  // Every convolution of the cudnn_ cases is one that cuDNN takes.
  if (absl::StartsWith(GetParam().name, "cudnn_")) {
    const std::string hlo = GetParam().hlo;
    int convolutions = 0;
    for (size_t at = hlo.find(" convolution("); at != std::string::npos;
         at = hlo.find(" convolution(", at + 1)) {
      ++convolutions;
    }
    EXPECT_EQ(cudnn, convolutions);
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaCodegen, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// The convolutions cuDNN takes, run as their direct kernels: what a GPU
// runs where cuDNN has no engine for one.
TEST(CudaCodegen, DirectConvolutionKernelsMatchTheHostBackend) {
  int convolutions = 0;
  for (const Case& c : kCases) {
    if (!absl::StartsWith(c.name, "cudnn_")) continue;
    SCOPED_TRACE(c.name);
    std::unique_ptr<hlo::Module> module = emulation::Parse(c.hlo);
    ASSERT_NE(module, nullptr);
    auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    CompareWithHost(*module, *compiled, absl::StrCat(c.name, "_direct"), c.rtol,
                    "", /*cudnn=*/false);
    ++convolutions;
  }
  EXPECT_EQ(convolutions, 6);
}

TEST(CudaCodegen, MlpTrainStepMatchesTheHostBackend) {
  std::ifstream file(
      absl::StrCat(PJRT_SOURCE_DIR, "/tests/data/mlp_train_step.hlo"));
  std::stringstream text;
  text << file.rdbuf();
  const std::string hlo = text.str();
  ASSERT_FALSE(hlo.empty());
  CheckAgainstHost({"mlp_train_step", hlo.c_str(), 1e-4});
}

// Every test program the CUDA backend compiles (and that runs alone, on
// arrays of reasonable size) computes what the host backend computes.
TEST(CudaCodegen, EveryTestProgramMatchesTheHostBackend) {
  int compared = 0;
  for (const std::string& path : pjrt::testing::TestPrograms()) {
    std::unique_ptr<hlo::Module> module = pjrt::testing::LoadTestProgram(path);
    if (module == nullptr) continue;
    auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
    if (!compiled.ok()) continue;  // refused by name (the compile check)
    int64_t bytes = 0;
    bool collective = false;
    ForEachLaunch(compiled->generated.launches, [&](const Launch& l) {
      collective |= l.kind == Launch::Kind::kCollective;
    });
    for (const host::BufferSlot& slot : compiled->lowered->slots) {
      bytes += slot.shape.IsArray() ? slot.shape.ByteSize() : 0;
    }
    if (collective || bytes > (int64_t{64} << 20)) continue;
    SCOPED_TRACE(path);
    CompareWithHost(*module, *compiled, absl::StrCat("corpus_", compared),
                    1e-4);
    ++compared;
  }
  std::cout << compared << " test programs compared with the host backend\n";
  EXPECT_GE(compared, 108);
}

}  // namespace
}  // namespace pjrt::compiler::cuda
