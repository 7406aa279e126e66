// The ragged ops as dense HLO (hlo/passes.h). ragged-dot is a dot and masks:
// each group's [start, end) along the ragged dimension comes from
// group_sizes by a running sum, and an iota compared with them selects what
// each group keeps. ragged-all-to-all is two all-to-alls, of the rows each
// update sends and of where they go, and a scatter of what arrives.
#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "hlo/dot_shapes.h"
#include "hlo/passes.h"
#include "hlo/passes_internal.h"

namespace pjrt::hlo {
namespace {

using passes_internal::Add;
using passes_internal::DimsOf;

std::string List(const std::vector<int64_t>& v) {
  return absl::StrCat("{", absl::StrJoin(v, ","), "}");
}

// Attributes the parser keeps as text (windows, dimension numbers), as
// the text would have given them.
void SetRaw(Instruction* inst,
            std::initializer_list<std::pair<const char*, std::string>> values) {
  Attributes* a = inst->mutable_attributes();
  for (const auto& [name, value] : values) {
    a->present.push_back(name);
    a->raw.emplace_back(name, value);
  }
}

// A compare's direction.
void SetDirection(Instruction* compare, ComparisonDirection d) {
  static constexpr const char* kNames[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  compare->mutable_attributes()->comparison_direction = d;
  SetRaw(compare, {{"direction", kNames[static_cast<int>(d)]}});
}

class RaggedDotExpansion {
 public:
  RaggedDotExpansion(Module* module, Computation* c, Instruction* inst,
                     RaggedDot r)
      : module_(module),
        c_(c),
        inst_(inst),
        r_(std::move(r)),
        type_(inst->shape().element_type()) {}

  void Run() {
    Bounds();
    Instruction* replacement = nullptr;
    switch (r_.mode) {
      case RaggedDot::Mode::kNonContracting:
        replacement = TileRows() > 0 ? Tiled() : NonContracting();
        break;
      case RaggedDot::Mode::kContracting:
        replacement = TileRows() > 0 ? Tiled() : Contracting();
        break;
      case RaggedDot::Mode::kBatch:
        replacement = Batch();
        break;
    }
    c_->ReplaceUses(inst_, replacement);
  }

 private:
  Instruction* lhs() const { return inst_->operand(0); }
  Instruction* rhs() const { return inst_->operand(1); }
  Instruction* sizes() const { return inst_->operand(2); }
  int64_t batch() const {
    return static_cast<int64_t>(r_.dot.lhs_batch_dimensions.size());
  }
  bool per_prefix() const { return sizes()->shape().rank() > 1; }

  Instruction* Make(Opcode opcode, Shape shape,
                    std::vector<Instruction*> operands) {
    return Add(c_, *inst_, absl::StrCat(".ragged", made_++), opcode,
               OpcodeName(opcode), std::move(shape), std::move(operands));
  }
  Instruction* Zero(PrimitiveType t) {
    Instruction* zero = Make(Opcode::kConstant, Shape(t, {}), {});
    zero->mutable_attributes()->literal = Literal(Shape(t, {}));
    return zero;
  }
  Instruction* Broadcast(Instruction* v, Shape to,
                         std::vector<int64_t> dimensions) {
    Instruction* b = Make(Opcode::kBroadcast, std::move(to), {v});
    b->mutable_attributes()->dimensions = std::move(dimensions);
    return b;
  }
  Instruction* Zeros(const Shape& shape) {
    return Broadcast(Zero(shape.element_type()),
                     Shape(shape.element_type(), DimsOf(shape)), {});
  }
  Instruction* Compare(Instruction* l, Instruction* r,
                       ComparisonDirection direction) {
    Instruction* compare =
        Make(Opcode::kCompare, l->shape().WithElementType(PrimitiveType::kPred),
             {l, r});
    SetDirection(compare, direction);
    return compare;
  }
  Instruction* Select(Instruction* pred, Instruction* yes, Instruction* no,
                      Shape shape) {
    return Make(Opcode::kSelect, std::move(shape), {pred, yes, no});
  }
  Instruction* Dot(Instruction* l, Instruction* r, DotDimensionNumbers d,
                   Shape shape) {
    Instruction* dot = Make(Opcode::kDot, std::move(shape), {l, r});
    dot->mutable_attributes()->dot_dimension_numbers = std::move(d);
    return dot;
  }

  // starts_ and ends_: each group's [start, end) along the ragged
  // dimension, s64 of group_sizes' shape. The ends are the running sum
  // of the sizes along their last dimension (a window of g over g - 1
  // zeros of padding and the sizes).
  void Bounds() {
    const Shape wide = sizes()->shape().WithElementType(PrimitiveType::kS64);
    Instruction* sizes64 =
        sizes()->shape().element_type() == PrimitiveType::kS64
            ? sizes()
            : Make(Opcode::kConvert,
                   Shape(PrimitiveType::kS64, DimsOf(sizes()->shape())),
                   {sizes()});
    // Sizes as XLA asks for them lie in [0, m] (m: the ragged dimension's
    // length); others are taken as the nearest such, so that the groups
    // stay in order, never overlap and their sums cannot overflow.
    const int64_t m = lhs()->shape().dimensions(r_.lhs_ragged);
    const auto bound = [&](int64_t v) { return Broadcast(S64(v), wide, {}); };
    sizes64 =
        Make(Opcode::kMinimum, wide,
             {Make(Opcode::kMaximum, wide, {sizes64, bound(0)}), bound(m)});
    ends_ = sizes64;
    const int64_t g = r_.groups;
    if (g > 0) {
      std::vector<std::string> size(wide.rank(), "1");
      std::vector<std::string> pad(wide.rank(), "0_0");
      size.back() = absl::StrCat(g);
      pad.back() = absl::StrCat(g - 1, "_0");
      ends_ =
          Make(Opcode::kReduceWindow, Shape(wide.element_type(), DimsOf(wide)),
               {sizes64, Zero(PrimitiveType::kS64)});
      SetRaw(ends_,
             {{"window", absl::StrCat("{size=", absl::StrJoin(size, "x"),
                                      " pad=", absl::StrJoin(pad, "x"), "}")}});
      ends_->AddCalledComputation(
          passes_internal::ScalarAddRegion(module_, PrimitiveType::kS64));
    }
    starts_ = Make(Opcode::kSubtract, ends_->shape(), {ends_, sizes64});
  }

  // `bound` (starts_ or ends_) broadcast into `shape` (as s64), its
  // dimension i along targets[i]: transposed first where the targets
  // are not in order.
  Instruction* Place(Instruction* bound, const Shape& shape,
                     const std::vector<int64_t>& targets) {
    std::vector<int64_t> order(targets.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return targets[a] < targets[b]; });
    Instruction* v = bound;
    if (!std::is_sorted(targets.begin(), targets.end())) {
      std::vector<int64_t> dims;
      for (int64_t i : order) dims.push_back(bound->shape().dimensions(i));
      v = Make(Opcode::kTranspose, Shape(PrimitiveType::kS64, dims), {bound});
      v->mutable_attributes()->dimensions = order;
    }
    std::vector<int64_t> sorted = targets;
    std::sort(sorted.begin(), sorted.end());
    return Broadcast(v, Shape(PrimitiveType::kS64, DimsOf(shape)), sorted);
  }

  // Where the index along `along` of `shape` lies in the group that
  // group_sizes' dimensions, placed along `targets`, tell: a pred array.
  Instruction* InGroup(const Shape& shape, int64_t along,
                       const std::vector<int64_t>& targets) {
    const Shape wide(PrimitiveType::kS64, DimsOf(shape));
    Instruction* at = Make(Opcode::kIota, wide, {});
    at->mutable_attributes()->iota_dimension = along;
    return Make(
        Opcode::kAnd, wide.WithElementType(PrimitiveType::kPred),
        {Compare(at, Place(starts_, wide, targets), ComparisonDirection::kGe),
         Compare(at, Place(ends_, wide, targets), ComparisonDirection::kLt)});
  }

  // group_sizes' prefix dimensions along the first of `shape`, its
  // groups along `group`.
  std::vector<int64_t> Targets(int64_t group) const {
    std::vector<int64_t> targets;
    if (per_prefix()) {
      for (size_t i = 0; i < r_.prefix.size(); ++i) targets.push_back(i);
    }
    targets.push_back(group);
    return targets;
  }

  std::vector<int64_t> FreeDimensions(int64_t rank,
                                      const std::vector<int64_t>& batch,
                                      const std::vector<int64_t>& contracting) {
    std::vector<int64_t> free;
    for (int64_t i = 0; i < rank; ++i) {
      if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
          std::find(contracting.begin(), contracting.end(), i) ==
              contracting.end()) {
        free.push_back(i);
      }
    }
    return free;
  }

  // Every lhs row against every group's rhs, [batch, lhs free, rhs free
  // with the group dimension]; each row keeps its own group's product,
  // and the sum over the group dimension is the result.
  Instruction* NonContracting() {
    const std::vector<int64_t> lhs_free =
        FreeDimensions(lhs()->shape().rank(), r_.dot.lhs_batch_dimensions,
                       r_.dot.lhs_contracting_dimensions);
    const std::vector<int64_t> rhs_free =
        FreeDimensions(rhs()->shape().rank(), r_.dot.rhs_batch_dimensions,
                       r_.dot.rhs_contracting_dimensions);
    const auto position = [](const std::vector<int64_t>& v, int64_t x) {
      return static_cast<int64_t>(std::find(v.begin(), v.end(), x) - v.begin());
    };
    const int64_t row = batch() + position(lhs_free, r_.lhs_ragged);
    const int64_t at_group = batch() + static_cast<int64_t>(lhs_free.size()) +
                             position(rhs_free, r_.rhs_group[0]);
    std::vector<int64_t> dims = r_.result_dimensions;
    dims.insert(dims.begin() + at_group, r_.groups);
    const Shape all(type_, dims);
    Instruction* product = Dot(lhs(), rhs(), r_.dot, all);
    Instruction* kept =
        Select(InGroup(all, row, Targets(at_group)), product, Zeros(all), all);
    Instruction* sum =
        Make(Opcode::kReduce, inst_->shape(), {kept, Zero(type_)});
    sum->mutable_attributes()->dimensions = {at_group};
    sum->AddCalledComputation(passes_internal::ScalarAddRegion(module_, type_));
    return sum;
  }

  // One lhs per group, its elements outside the group zeroed: [g, lhs];
  // their dot gives [batch, g, lhs free, rhs free], transposed to the
  // result's [g, batch, ...].
  Instruction* Contracting() {
    const Shape& l = lhs()->shape();
    std::vector<int64_t> expanded = {r_.groups};
    std::vector<int64_t> spread;
    for (int64_t i = 0; i < l.rank(); ++i) {
      expanded.push_back(l.dimensions(i));
      spread.push_back(i + 1);
    }
    const Shape masked_shape(l.element_type(), expanded);
    std::vector<int64_t> targets;
    if (per_prefix()) {
      for (int64_t d : r_.prefix) targets.push_back(d + 1);
    }
    targets.push_back(0);
    Instruction* masked =
        Select(InGroup(masked_shape, r_.lhs_ragged + 1, targets),
               Broadcast(lhs(), masked_shape, spread), Zeros(masked_shape),
               masked_shape);
    DotDimensionNumbers d = r_.dot;
    for (int64_t& x : d.lhs_batch_dimensions) ++x;
    for (int64_t& x : d.lhs_contracting_dimensions) ++x;
    std::vector<int64_t> dot_dims(r_.result_dimensions.begin() + 1,
                                  r_.result_dimensions.end());
    dot_dims.insert(dot_dims.begin() + batch(), r_.groups);
    Instruction* product = Dot(masked, rhs(), d, Shape(type_, dot_dims));
    std::vector<int64_t> permutation = {batch()};
    for (int64_t i = 0; i < static_cast<int64_t>(dot_dims.size()); ++i) {
      if (i != batch()) permutation.push_back(i);
    }
    Instruction* result = Make(Opcode::kTranspose, inst_->shape(), {product});
    result->mutable_attributes()->dimensions = permutation;
    return result;
  }

  // The dot, with the batches past the last group zeroed.
  Instruction* Batch() {
    const Shape plain(type_, r_.result_dimensions);
    if (r_.groups == 0) return Broadcast(Zero(type_), inst_->shape(), {});
    const auto& lb = r_.dot.lhs_batch_dimensions;
    const int64_t at =
        std::find(lb.begin(), lb.end(), r_.lhs_ragged) - lb.begin();
    // The last end of each prefix: [prefix..., 1], reshaped to [prefix...].
    const Shape& bounds = ends_->shape();
    std::vector<int64_t> last_dims = DimsOf(bounds);
    last_dims.back() = 1;
    Instruction* last =
        Make(Opcode::kSlice, Shape(PrimitiveType::kS64, last_dims), {ends_});
    for (int64_t i = 0; i < bounds.rank(); ++i) {
      const int64_t n = bounds.dimensions(i);
      last->mutable_attributes()->slice.push_back(
          i + 1 == bounds.rank() ? SliceDimension{n - 1, n, 1}
                                 : SliceDimension{0, n, 1});
    }
    last_dims.pop_back();
    Instruction* total =
        Make(Opcode::kReshape, Shape(PrimitiveType::kS64, last_dims), {last});
    const Shape wide(PrimitiveType::kS64, r_.result_dimensions);
    Instruction* index = Make(Opcode::kIota, wide, {});
    index->mutable_attributes()->iota_dimension = at;
    std::vector<int64_t> prefix(last_dims.size());
    std::iota(prefix.begin(), prefix.end(), 0);
    Instruction* kept = Compare(index, Broadcast(total, wide, prefix),
                                ComparisonDirection::kLt);
    return Select(kept, Dot(lhs(), rhs(), r_.dot, plain), Zeros(plain),
                  inst_->shape());
  }

  // The rows of a tile of the loop Tiled() runs, or 0 where the dense
  // expansion is used. Without batch dimensions or group sizes per index:
  // a ragged free dimension of a [m, k] lhs (the first) against a [g, k, n]
  // or [g, n, k] rhs, or a ragged contracting dimension of a [m, k] or
  // [k, m] lhs against a [m, n] or [n, m] rhs; whose tiles do at most half
  // the dense expansion's work (g times a dot's) and whose table of trips
  // stays small.
  int64_t TileRows() const {
    const Shape& l = lhs()->shape();
    const Shape& r = rhs()->shape();
    if (batch() != 0 || per_prefix() || l.rank() != 2 || r_.groups < 2 ||
        r_.dot.lhs_contracting_dimensions.size() != 1) {
      return 0;
    }
    if (r_.mode == RaggedDot::Mode::kNonContracting) {
      if (r.rank() != 3 || r_.lhs_ragged != 0 || r_.rhs_group.size() != 1 ||
          r_.rhs_group[0] != 0) {
        return 0;
      }
    } else if (r_.mode != RaggedDot::Mode::kContracting || r.rank() != 2 ||
               !r_.rhs_group.empty()) {
      return 0;
    }
    const int64_t m = l.dimensions(r_.lhs_ragged), g = r_.groups;
    if (m < 2) return 0;
    // Tiles of about half a group's share of the rows: at most (g - 1) T
    // rows multiplied in vain, about half the lhs.
    const int64_t tile =
        std::min(m, std::clamp<int64_t>((m + 2 * g - 1) / (2 * g), 16, 256));
    const int64_t tiles = (m + tile - 1) / tile + g - 1;
    // The table of trips is made from a [trips, g] grid: kept small.
    if (tiles * g > (int64_t{1} << 24)) return 0;
    return 2 * tiles * tile <= m * g ? tile : 0;
  }

  Instruction* S64(int64_t v) { return IntConstant(PrimitiveType::kS64, v); }
  Instruction* IntConstant(PrimitiveType t, int64_t v) {
    Instruction* k = Make(Opcode::kConstant, Shape(t, {}), {});
    Literal literal{Shape(t, {})};
    if (t == PrimitiveType::kS32) {
      literal.Set<int32_t>(0, static_cast<int32_t>(v));
    } else {
      literal.Set<int64_t>(0, v);
    }
    k->mutable_attributes()->literal = std::move(literal);
    return k;
  }
  Instruction* Binary(Opcode op, Instruction* a, Instruction* b) {
    return Make(op, a->shape(), {a, b});
  }
  // `v` (s64 [g]) at each of `at` (s64 [P], values in [0, g)): [P].
  Instruction* Pick(Instruction* v, Instruction* at) {
    const int64_t p = at->shape().dimensions(0), g = r_.groups;
    const Shape grid(PrimitiveType::kS64, {p, g});
    Instruction* index = Make(Opcode::kIota, grid, {});
    index->mutable_attributes()->iota_dimension = 1;
    Instruction* hit =
        Compare(index, Broadcast(at, grid, {0}), ComparisonDirection::kEq);
    Instruction* kept = Select(hit, Broadcast(v, grid, {1}), Zeros(grid), grid);
    Instruction* sum = Make(Opcode::kReduce, Shape(PrimitiveType::kS64, {p}),
                            {kept, Zero(PrimitiveType::kS64)});
    sum->mutable_attributes()->dimensions = {1};
    sum->AddCalledComputation(
        passes_internal::ScalarAddRegion(module_, PrimitiveType::kS64));
    return sum;
  }
  // Element `i` of the s64 vector `v`, as a scalar.
  Instruction* Element(Instruction* v, int64_t i) {
    Instruction* one =
        Make(Opcode::kSlice, Shape(PrimitiveType::kS64, {1}), {v});
    one->mutable_attributes()->slice = {SliceDimension{i, i + 1, 1}};
    return Make(Opcode::kReshape, Shape(PrimitiveType::kS64, {}), {one});
  }
  Computation* NewComputation(absl::string_view what) {
    const std::string base = absl::StrCat(inst_->name(), ".ragged_", what);
    std::string name = base;
    for (int n = 1; module_->FindComputation(name) != nullptr; ++n) {
      name = absl::StrCat(base, ".", n);
    }
    return module_->AddComputation(std::make_unique<Computation>(name));
  }
  Instruction* Parameter(Computation* c, const Shape& shape) {
    auto p = std::make_unique<Instruction>("state", Opcode::kParameter,
                                           "parameter", shape);
    p->set_position(inst_->line(), inst_->column());
    p->mutable_attributes()->parameter_number = 0;
    Instruction* param = c->AddInstruction(std::move(p));
    c->mutable_parameters()->push_back(param);
    return param;
  }
  Instruction* Element(Instruction* tuple, int index, const Shape& shape) {
    Instruction* e = Make(Opcode::kGetTupleElement, shape, {tuple});
    e->mutable_attributes()->tuple_index = index;
    return e;
  }

  // The table of Tiled()'s trips over `m` rows in tiles of `tile`, s64
  // [trips, 4]: each trip's group, the first row of its tile (clamped into
  // the rows), and the rows [lo, hi) of that tile the group has (none for
  // the trips past the last). A trip per group and row block that meet, in
  // the groups' order: at most ceil(m / T) + g - 1.
  Instruction* TripTable(int64_t m, int64_t tile, int64_t trips) {
    const int64_t g = r_.groups;
    const Shape vec(PrimitiveType::kS64, {g});
    const auto fill = [&](int64_t v, const Shape& shape) {
      return Broadcast(S64(v), shape, {});
    };
    // Each group's rows, clamped into the lhs: [lo, hi).
    Instruction* lo =
        Binary(Opcode::kMinimum,
               Binary(Opcode::kMaximum, starts_, fill(0, vec)), fill(m, vec));
    Instruction* hi = Binary(Opcode::kMaximum, lo,
                             Binary(Opcode::kMinimum, ends_, fill(m, vec)));
    Instruction* first = Binary(Opcode::kDivide, lo, fill(tile, vec));
    Instruction* last =
        Binary(Opcode::kDivide, Binary(Opcode::kSubtract, hi, fill(1, vec)),
               fill(tile, vec));
    Instruction* blocks =
        Select(Compare(hi, lo, ComparisonDirection::kGt),
               Binary(Opcode::kAdd, Binary(Opcode::kSubtract, last, first),
                      fill(1, vec)),
               fill(0, vec), vec);
    // The trips up to each group's last (inclusive running sum) and
    // before its first.
    Instruction* through =
        Make(Opcode::kReduceWindow, vec, {blocks, Zero(PrimitiveType::kS64)});
    SetRaw(through,
           {{"window", absl::StrCat("{size=", g, " pad=", g - 1, "_0}")}});
    through->AddCalledComputation(
        passes_internal::ScalarAddRegion(module_, PrimitiveType::kS64));
    Instruction* before = Binary(Opcode::kSubtract, through, blocks);
    // Trip p's group: how many groups end at or before it.
    const Shape trip_vec(PrimitiveType::kS64, {trips});
    const Shape grid(PrimitiveType::kS64, {trips, g});
    Instruction* trip = Make(Opcode::kIota, grid, {});
    trip->mutable_attributes()->iota_dimension = 0;
    Instruction* done =
        Compare(Broadcast(through, grid, {1}), trip, ComparisonDirection::kLe);
    Instruction* ended =
        Make(Opcode::kReduce, trip_vec,
             {Make(Opcode::kConvert, grid, {done}), Zero(PrimitiveType::kS64)});
    ended->mutable_attributes()->dimensions = {1};
    ended->AddCalledComputation(
        passes_internal::ScalarAddRegion(module_, PrimitiveType::kS64));
    Instruction* valid =
        Compare(ended, fill(g, trip_vec), ComparisonDirection::kLt);
    Instruction* group = Binary(Opcode::kMinimum, ended, fill(g - 1, trip_vec));
    Instruction* index = Make(Opcode::kIota, trip_vec, {});
    index->mutable_attributes()->iota_dimension = 0;
    Instruction* block =
        Binary(Opcode::kAdd, Pick(first, group),
               Binary(Opcode::kSubtract, index, Pick(before, group)));
    Instruction* block_row =
        Binary(Opcode::kMultiply, block, fill(tile, trip_vec));
    Instruction* start =
        Binary(Opcode::kMinimum, block_row, fill(m - tile, trip_vec));
    Instruction* row_lo = Binary(Opcode::kMaximum, Pick(lo, group), block_row);
    Instruction* row_hi =
        Select(valid,
               Binary(Opcode::kMinimum, Pick(hi, group),
                      Binary(Opcode::kAdd, block_row, fill(tile, trip_vec))),
               row_lo, trip_vec);
    const Shape column(PrimitiveType::kS64, {trips, 1});
    std::vector<Instruction*> columns;
    for (Instruction* v : {group, start, row_lo, row_hi}) {
      columns.push_back(Make(Opcode::kReshape, column, {v}));
    }
    Instruction* table = Make(Opcode::kConcatenate,
                              Shape(PrimitiveType::kS64, {trips, 4}), columns);
    table->mutable_attributes()->dimensions = {1};
    return table;
  }

  // A trip of Tiled()'s body: its group, the first row of its tile, and the
  // rows [lo, hi) it takes, read from the table at the trip's counter.
  struct Trip {
    Instruction* group;
    Instruction* start;
    Instruction* lo;
    Instruction* hi;
  };
  Trip ReadTrip(Instruction* table, Instruction* at) {
    Instruction* mine =
        Make(Opcode::kDynamicSlice, Shape(PrimitiveType::kS64, {1, 4}),
             {table, at, IntConstant(PrimitiveType::kS32, 0)});
    mine->mutable_attributes()->dynamic_slice_sizes = {1, 4};
    Instruction* values =
        Make(Opcode::kReshape, Shape(PrimitiveType::kS64, {4}), {mine});
    return {Element(values, 0), Element(values, 1), Element(values, 2),
            Element(values, 3)};
  }

  // A pred array of `shape` that is true where the index along `along`,
  // counted from the trip's start, lies in the trip's rows.
  Instruction* TripRows(const Shape& shape, int64_t along, const Trip& t) {
    const Shape wide(PrimitiveType::kS64, DimsOf(shape));
    Instruction* row = Make(Opcode::kIota, wide, {});
    row->mutable_attributes()->iota_dimension = along;
    Instruction* at = Binary(Opcode::kAdd, row, Broadcast(t.start, wide, {}));
    return Make(
        Opcode::kAnd, wide.WithElementType(PrimitiveType::kPred),
        {Compare(at, Broadcast(t.lo, wide, {}), ComparisonDirection::kGe),
         Compare(at, Broadcast(t.hi, wide, {}), ComparisonDirection::kLt)});
  }

  // `operand`'s `size` rows from the trip's start along `along` (its other
  // dimension whole).
  Instruction* TripSlice(Instruction* operand, int64_t along, int64_t size,
                         Instruction* start) {
    std::vector<int64_t> dims = DimsOf(operand->shape());
    dims[along] = size;
    Instruction* zero = S64(0);
    Instruction* slice = Make(
        Opcode::kDynamicSlice, Shape(operand->shape().element_type(), dims),
        {operand, along == 0 ? start : zero, along == 0 ? zero : start});
    slice->mutable_attributes()->dynamic_slice_sizes = dims;
    return slice;
  }

  // The ragged dimension in tiles of TileRows() rows, in a loop of a known
  // trip count over TripTable's trips; each trip takes the rows of its
  // tile its group has and adds their product into the result, in place:
  // a ragged free dimension multiplies the tile by its group's rhs into
  // the tile's rows of the result (rows of no group stay 0); a ragged
  // contracting one multiplies the tile's lhs and rhs rows (the others
  // zeroed in both) into its group's [k, n] of the result (groups without
  // rows stay 0). About (m + (g - 1) T) k n work where the dense
  // expansion does m g k n.
  Instruction* Tiled() {
    const Shape& l = lhs()->shape();
    const Shape& r = rhs()->shape();
    const bool free = r_.mode == RaggedDot::Mode::kNonContracting;
    const int64_t m = l.dimensions(r_.lhs_ragged), tile = TileRows();
    const int64_t trips = (m + tile - 1) / tile + r_.groups - 1;
    Instruction* table = TripTable(m, tile, trips);
    const Shape& table_shape = table->shape();
    // A group's products of its tiles are summed in f32 where the result
    // is a narrower float (as one dot would sum them), rounded once after
    // the loop; a row's single product in its own type.
    const PrimitiveType result_type = type_;
    const bool widen = !free && IsFloatingPoint(type_) &&
                       ByteWidth(type_) < ByteWidth(PrimitiveType::kF32);
    if (widen) type_ = PrimitiveType::kF32;
    const Shape out_shape(type_, r_.result_dimensions);
    const Shape counter(PrimitiveType::kS32, {});
    const Shape state = Shape::Tuple({counter, out_shape, l, r, table_shape});

    Computation* entry = c_;
    // The condition: trip < trips.
    Computation* condition = NewComputation("tiles_condition");
    c_ = condition;
    {
      Instruction* param = Parameter(condition, state);
      Instruction* at = Element(param, 0, counter);
      Instruction* below =
          Make(Opcode::kCompare, Shape(PrimitiveType::kPred, {}),
               {at, IntConstant(PrimitiveType::kS32, trips)});
      SetDirection(below, ComparisonDirection::kLt);
      condition->set_root(below);
    }
    // The body: one tile.
    Computation* body = NewComputation("tiles_body");
    c_ = body;
    {
      Instruction* param = Parameter(body, state);
      Instruction* at = Element(param, 0, counter);
      Instruction* out = Element(param, 1, out_shape);
      Instruction* lhs_in = Element(param, 2, l);
      Instruction* rhs_in = Element(param, 3, r);
      Instruction* rows = Element(param, 4, table_shape);
      const Trip trip = ReadTrip(rows, at);
      Instruction* zero64 = S64(0);
      Instruction* updated = nullptr;
      if (free) {
        // [T, k] by the group's [k, n] (or [n, k]) into rows of [m, n].
        const int64_t n = r_.result_dimensions[1];
        Instruction* part = TripSlice(lhs_in, 0, tile, trip.start);
        Instruction* weights =
            Make(Opcode::kDynamicSlice,
                 Shape(r.element_type(), {1, r.dimensions(1), r.dimensions(2)}),
                 {rhs_in, trip.group, zero64, zero64});
        weights->mutable_attributes()->dynamic_slice_sizes = {
            1, r.dimensions(1), r.dimensions(2)};
        Instruction* matrix =
            Make(Opcode::kReshape,
                 Shape(r.element_type(), {r.dimensions(1), r.dimensions(2)}),
                 {weights});
        DotDimensionNumbers d;
        d.lhs_contracting_dimensions = r_.dot.lhs_contracting_dimensions;
        d.rhs_contracting_dimensions = {r_.dot.rhs_contracting_dimensions[0] -
                                        1};
        const Shape tile_shape(type_, {tile, n});
        Instruction* product = Dot(part, matrix, d, tile_shape);
        Instruction* kept = Select(TripRows(tile_shape, 0, trip), product,
                                   Zeros(tile_shape), tile_shape);
        Instruction* now = TripSlice(out, 0, tile, trip.start);
        updated =
            Make(Opcode::kDynamicUpdateSlice, out_shape,
                 {out, Binary(Opcode::kAdd, now, kept), trip.start, zero64});
      } else {
        // The tile's rows of both, the others zeroed, contracted into the
        // group's [1, k, n].
        const int64_t lhs_rows = r_.lhs_ragged;
        const int64_t rhs_rows = r_.dot.rhs_contracting_dimensions[0];
        const auto rows_of = [&](Instruction* operand, int64_t along) {
          Instruction* part = TripSlice(operand, along, tile, trip.start);
          return Select(TripRows(part->shape(), along, trip), part,
                        Zeros(part->shape()), part->shape());
        };
        DotDimensionNumbers d;
        d.lhs_contracting_dimensions = {lhs_rows};
        d.rhs_contracting_dimensions = {rhs_rows};
        std::vector<int64_t> dims = r_.result_dimensions;
        dims[0] = 1;
        const Shape group_shape(type_, dims);
        Instruction* product =
            Dot(rows_of(lhs_in, lhs_rows), rows_of(rhs_in, rhs_rows), d,
                Shape(type_, {dims[1], dims[2]}));
        Instruction* now = Make(Opcode::kDynamicSlice, group_shape,
                                {out, trip.group, zero64, zero64});
        now->mutable_attributes()->dynamic_slice_sizes = dims;
        Instruction* sum = Binary(
            Opcode::kAdd, now, Make(Opcode::kReshape, group_shape, {product}));
        updated = Make(Opcode::kDynamicUpdateSlice, out_shape,
                       {out, sum, trip.group, zero64, zero64});
      }
      Instruction* next =
          Binary(Opcode::kAdd, at, IntConstant(PrimitiveType::kS32, 1));
      body->set_root(
          Make(Opcode::kTuple, state, {next, updated, lhs_in, rhs_in, rows}));
    }
    c_ = entry;
    Instruction* init = Make(Opcode::kTuple, state,
                             {IntConstant(PrimitiveType::kS32, 0),
                              Zeros(out_shape), lhs(), rhs(), table});
    Instruction* loop = Make(Opcode::kWhile, state, {init});
    loop->AddCalledComputation(condition);
    loop->AddCalledComputation(body);
    Instruction* result = Element(loop, 1, out_shape);
    if (!widen) return result;
    type_ = result_type;
    return Make(Opcode::kConvert, inst_->shape(), {result});
  }

  Module* module_;
  Computation* c_;
  Instruction* inst_;
  RaggedDot r_;
  PrimitiveType type_;
  Instruction* starts_ = nullptr;
  Instruction* ends_ = nullptr;
  int made_ = 0;
};

// ragged-all-to-all(input, output, input_offsets, send_sizes,
// output_offsets, recv_sizes): update u to the group's member j (entry
// i = j * U + u of the vectors) sends rows [input_offsets[i],
// + send_sizes[i]) of the input to rows from output_offsets[i] of j's
// output; rows nothing arrives at keep the output's values.
class RaggedAllToAllExpansion {
 public:
  RaggedAllToAllExpansion(Module* module, Computation* c, Instruction* inst)
      : module_(module), c_(c), inst_(inst) {}

  void Run() {
    const Shape& in = inst_->operand(0)->shape();
    const Shape& out = inst_->operand(1)->shape();
    const int64_t n = in.dimensions(0);
    if (n == 0) {
      // Nothing to send, so nothing arrives.
      c_->ReplaceUses(inst_,
                      Make(Opcode::kCopy, inst_->shape(), {inst_->operand(1)}));
      return;
    }
    const int64_t updates = inst_->operand(2)->shape().dimensions(0);
    const Shape rows(PrimitiveType::kS64, {updates, n});
    const Shape indices_shape(PrimitiveType::kS64, {updates, n, 1});
    // Each update's rows: every row from its offset on (clamped in
    // bounds; the receiver writes only the first send_sizes of them).
    Instruction* row = Make(Opcode::kIota, rows, {});
    row->mutable_attributes()->iota_dimension = 1;
    Instruction* starts = Make(Opcode::kAdd, rows,
                               {row, AlongRows(Wide(inst_->operand(2)), rows)});
    std::vector<int64_t> sent_dims = {updates};
    for (int64_t d : DimsOf(in)) sent_dims.push_back(d);
    const Shape sent_shape(in.element_type(), sent_dims);
    Instruction* sent = Make(
        Opcode::kGather, sent_shape,
        {inst_->operand(0), Make(Opcode::kReshape, indices_shape, {starts})});
    std::vector<int64_t> window = {1};
    std::vector<int64_t> window_dims;
    for (int64_t d = 1; d < in.rank(); ++d) {
      window.push_back(in.dimensions(d));
      window_dims.push_back(d + 1);
    }
    SetRaw(sent, {{"offset_dims", List(window_dims)},
                  {"collapsed_slice_dims", "{0}"},
                  {"start_index_map", "{0}"},
                  {"index_vector_dim", "2"},
                  {"slice_sizes", List(window)}});
    Instruction* received = Exchange(sent);
    // Where each update's rows go and how many there are, as the sender
    // told: [updates, 2] exchanged alike.
    const Shape pair(PrimitiveType::kS64, {updates, 1});
    const Shape pairs(PrimitiveType::kS64, {updates, 2});
    Instruction* told =
        Make(Opcode::kConcatenate, pairs,
             {Make(Opcode::kReshape, pair, {Wide(inst_->operand(4))}),
              Make(Opcode::kReshape, pair, {Wide(inst_->operand(3))})});
    told->mutable_attributes()->dimensions = {1};
    told = Exchange(told);
    const Shape vector(PrimitiveType::kS64, {updates});
    Instruction* to = Column(told, 0, vector);
    Instruction* count = Column(told, 1, vector);
    // Row k of update i goes to to[i] + k while k < count[i]; others to
    // the output's end, out of bounds, which a scatter skips.
    Instruction* kept =
        Make(Opcode::kCompare, rows.WithElementType(PrimitiveType::kPred),
             {row, AlongRows(count, rows)});
    SetDirection(kept, ComparisonDirection::kLt);
    Instruction* end =
        Make(Opcode::kConstant, Shape(PrimitiveType::kS64, {}), {});
    Literal past(Shape(PrimitiveType::kS64, {}));
    past.Set<int64_t>(0, out.dimensions(0));
    end->mutable_attributes()->literal = std::move(past);
    Instruction* targets =
        Make(Opcode::kSelect, rows,
             {kept, Make(Opcode::kAdd, rows, {row, AlongRows(to, rows)}),
              Make(Opcode::kBroadcast, rows, {end})});
    Instruction* scatter =
        Make(Opcode::kScatter, inst_->shape(),
             {inst_->operand(1),
              Make(Opcode::kReshape, indices_shape, {targets}), received});
    SetRaw(scatter, {{"update_window_dims", List(window_dims)},
                     {"inserted_window_dims", "{0}"},
                     {"scatter_dims_to_operand_dims", "{0}"},
                     {"index_vector_dim", "2"}});
    scatter->AddCalledComputation(
        passes_internal::ScalarSecondRegion(module_, out.element_type()));
    c_->ReplaceUses(inst_, scatter);
  }

 private:
  Instruction* Make(Opcode opcode, Shape shape,
                    std::vector<Instruction*> operands) {
    return Add(c_, *inst_, absl::StrCat(".ragged", made_++), opcode,
               OpcodeName(opcode), std::move(shape), std::move(operands));
  }
  // An s32 or s64 vector as s64.
  Instruction* Wide(Instruction* v) {
    if (v->shape().element_type() == PrimitiveType::kS64) return v;
    return Make(Opcode::kConvert,
                Shape(PrimitiveType::kS64, DimsOf(v->shape())), {v});
  }
  // A per-update vector along the first dimension of `rows`.
  Instruction* AlongRows(Instruction* v, const Shape& rows) {
    Instruction* b = Make(Opcode::kBroadcast, rows, {v});
    b->mutable_attributes()->dimensions = {0};
    return b;
  }
  Instruction* Column(Instruction* pairs, int64_t k, const Shape& vector) {
    Instruction* slice =
        Make(Opcode::kSlice,
             Shape(PrimitiveType::kS64, {vector.dimensions(0), 1}), {pairs});
    slice->mutable_attributes()->slice = {
        SliceDimension{0, vector.dimensions(0), 1},
        SliceDimension{k, k + 1, 1}};
    return Make(Opcode::kReshape, vector, {slice});
  }
  // all-to-all along the first dimension, in the op's groups: block j of
  // the updates goes to member j, and block j of the result came from it.
  Instruction* Exchange(Instruction* v) {
    Instruction* exchanged =
        Make(Opcode::kAllToAll,
             Shape(v->shape().element_type(), DimsOf(v->shape())), {v});
    Attributes* a = exchanged->mutable_attributes();
    const Attributes& from = inst_->attributes();
    a->channel_id = from.channel_id;
    a->replica_groups = from.replica_groups;
    a->use_global_device_ids = from.use_global_device_ids;
    for (const auto& [name, value] : from.raw) {
      if (name == "channel_id" || name == "replica_groups" ||
          name == "use_global_device_ids") {
        a->present.push_back(name);
        a->raw.emplace_back(name, value);
      }
    }
    a->dimensions = {0};
    SetRaw(exchanged, {{"dimensions", "{0}"}});
    return exchanged;
  }

  Module* module_;
  Computation* c_;
  Instruction* inst_;
  int made_ = 0;
};

}  // namespace

absl::StatusOr<int> ExpandRaggedDots(Module* module,
                                     bool keep_plain_ragged_dots) {
  return passes_internal::RewriteEach(
      module, [&](Computation* c, Instruction* inst) -> absl::StatusOr<bool> {
        if (inst->opcode() != Opcode::kRaggedDot) return false;
        if (keep_plain_ragged_dots && IsPlainRaggedDot(*inst)) return false;
        PJRT_ASSIGN_OR_RETURN(RaggedDot r, AnalyzeRaggedDot(*inst));
        RaggedDotExpansion(module, c, inst, std::move(r)).Run();
        return true;
      });
}

absl::StatusOr<int> ExpandRaggedAllToAlls(Module* module) {
  return passes_internal::RewriteEach(
      module, [&](Computation* c, Instruction* inst) -> absl::StatusOr<bool> {
        if (inst->opcode() != Opcode::kRaggedAllToAll) return false;
        RaggedAllToAllExpansion(module, c, inst).Run();
        return true;
      });
}

}  // namespace pjrt::hlo
