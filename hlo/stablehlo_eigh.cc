// The StableHLO translator's eigensolver calls, as JAX lowers jnp.linalg.eigh:
// lapack_ssyevd_ffi, lapack_dsyevd_ffi, lapack_cheevd_ffi and
// lapack_zheevd_ffi for CPUs, cusolver_syevd_ffi (hipSOLVER's alike) for
// GPUs. The matrix the named triangle holds is made whole (Hermitian, its
// diagonal real) and given to JacobiEigen (stablehlo_svd.cc); the
// eigenvalues are then sorted ascending with their vectors, as LAPACK
// returns them.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

bool Translator::IsLapackEighTarget(absl::string_view target) {
  return target == "lapack_ssyevd_ffi" || target == "lapack_dsyevd_ffi" ||
         target == "lapack_cheevd_ffi" || target == "lapack_zheevd_ffi" ||
         target == "cusolver_syevd_ffi" || target == "hipsolver_syevd_ffi";
}

absl::Status Translator::Syevd(Builder* b, const Operation& op,
                               absl::string_view target,
                               const std::vector<Value>& in) {
  UseFfiAttributes(op);
  const PrimitiveType type =
      LinalgCallType(target, in.empty() ? nullptr : &in[0].shape);
  const PrimitiveType real = RealPartType(type);
  const bool lapack = absl::StartsWith(target, "lapack_");
  const bool complex = IsComplex(type);
  bool fits = in.size() == 1 && in[0].shape.IsArray() &&
              in[0].shape.rank() >= 2 && in[0].shape.element_type() == type;
  std::vector<Shape> want;
  if (fits) {
    const Shape& a = in[0].shape;
    const int64_t nb = a.rank() - 2;
    std::vector<int64_t> batch(a.dimensions().begin(),
                               a.dimensions().begin() + nb);
    std::vector<int64_t> values = batch;
    values.push_back(a.dimensions(nb));
    fits = a.dimensions(nb) == a.dimensions(nb + 1);
    want = {a, Shape(real, values), Shape(PrimitiveType::kS32, batch)};
  }
  if (!fits || op.result_types != want) {
    return Invalid(
        op, absl::StrFormat("%s takes one square %s matrix [..., n, n] and "
                            "gives (vectors, values [..., n], info); got %d "
                            "operand(s)%s",
                            target,
                            lapack ? std::string(PrimitiveTypeName(type))
                                   : "f32, f64, c64 or c128",
                            in.size(), FirstOperandText(in)));
  }
  if (NoResultElements(op)) return DefineZeros(b, op);
  if (in[0].shape.dimensions(in[0].shape.rank() - 1) > kMaxJacobiColumns) {
    return Invalid(
        op, absl::StrFormat("%s of %s: pjrtd solves matrices of "
                            "at most %d rows",
                            target, in[0].shape.ToString(), kMaxJacobiColumns));
  }
  // The vectors are computed whatever the mode. LAPACK names the triangle
  // read by a letter, cuSOLVER by a flag.
  char uplo = 'L';
  if (lapack) {
    PJRT_ASSIGN_OR_RETURN(uplo, ConfigLetter(op, target, "uplo", "LU"));
  } else {
    PJRT_ASSIGN_OR_RETURN(const bool lower, ConfigFlag(op, "lower", true));
    uplo = lower ? 'L' : 'U';
  }
  const Shape& s = in[0].shape;
  const int64_t nb = s.rank() - 2, n = s.dimensions(nb);
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  std::vector<int64_t> value_dims = batch;
  value_dims.push_back(n);
  const Shape values(real, value_dims);
  const Shape info(PrimitiveType::kS32, batch);
  const Shape pred = s.WithElementType(PrimitiveType::kPred);
  const Shape index = s.WithElementType(PrimitiveType::kS32);
  const std::vector<int64_t> batch_dims = FirstDimensions(nb);
  // The matrix the triangle `uplo` names, made whole.
  const std::string rows =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb));
  const std::string cols =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
  const std::string whole =
      Emit(b, &op, s, "select",
           {Emit(b, &op, pred, "compare", {rows, cols},
                 uplo == 'L' ? "direction=GE" : "direction=LE"),
            in[0].name, Adjoint(b, op, in[0]).name});
  const std::string on_diagonal =
      Emit(b, &op, pred, "compare", {rows, cols}, "direction=EQ");
  // A Hermitian matrix's diagonal is real: LAPACK reads no imaginary part.
  const Shape s_real = s.WithElementType(real);
  const std::string hermitian =
      complex ? Emit(b, &op, s, "select",
                     {on_diagonal,
                      AsTyped(b, &op, Emit(b, &op, s_real, "real", {whole}), s),
                      whole})
              : whole;
  // The eigenvalues ascending, their vectors' columns along: sorted along
  // the columns with each column's value as the key.
  const auto [diagonal_values, v_final] = JacobiEigen(b, op, hermitian, s);
  std::vector<int64_t> key_dims = batch_dims;
  key_dims.push_back(nb + 1);
  const std::string keys = Emit(b, &op, s_real, "broadcast", {diagonal_values},
                                absl::StrCat("dimensions=", Braced(key_dims)));
  const std::string less_name = KeyOrderComputation(real, type, "LT");
  const Shape sorted_pair = Shape::Tuple({s_real, s});
  const std::string sorted =
      Emit(b, &op, sorted_pair, "sort", {keys, v_final},
           absl::StrFormat("dimensions={%d}, is_stable=true, to_apply=%%%s",
                           nb + 1, less_name));
  const std::string sorted_keys =
      Emit(b, &op, s_real, "get-tuple-element", {sorted}, "index=0");
  const std::string vectors =
      Emit(b, &op, s, "get-tuple-element", {sorted}, "index=1");
  // Every row of the sorted keys holds the values: the first one.
  std::vector<int64_t> first_row = batch;
  first_row.insert(first_row.end(), {1, n});
  std::vector<std::string> limits;
  for (int64_t d : batch) limits.push_back(absl::StrCat("[0:", d, "]"));
  limits.push_back(n > 0 ? "[0:1]" : "[0:0]");
  limits.push_back(absl::StrCat("[0:", n, "]"));
  if (n == 0) first_row[nb] = 0;
  const std::string sorted_values =
      Emit(b, &op, values, "reshape",
           {Emit(b, &op, Shape(real, first_row), "slice", {sorted_keys},
                 absl::StrCat("slice={", absl::StrJoin(limits, ", "), "}"))});
  return Define(b, op,
                {Value{vectors, s}, Value{sorted_values, values},
                 Value{EmitZeros(b, &op, info), info}});
}

}  // namespace pjrt::hlo::stablehlo_internal
