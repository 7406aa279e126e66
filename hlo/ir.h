// The HLO program representation: Module, Computation, Instruction.
//
// Built by the parser (hlo/parser.h) from HLO text, checked by the verifier
// (hlo/verifier.h), read by the compilers. A Module owns its computations,
// a Computation its instructions; Instruction and Computation pointers stay
// valid for the Module's life, but for what RemoveInstruction deletes and
// TakeComputations hands over. Not thread-safe to mutate; safe to read from
// several threads once built.
#ifndef PJRT_HLO_IR_H_
#define PJRT_HLO_IR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "hlo/literal.h"
#include "hlo/opcode.h"
#include "hlo/shape.h"

namespace pjrt::hlo {

class Computation;
class Module;

enum class ComparisonDirection { kEq, kNe, kLt, kLe, kGt, kGe };
// The comparison's `type=` attribute; kDefault when absent (FLOAT for
// floating-point operands, SIGNED/UNSIGNED for integers).
enum class ComparisonType { kDefault, kFloat, kTotalOrder, kSigned, kUnsigned };

struct DotDimensionNumbers {
  std::vector<int64_t> lhs_batch_dimensions;
  std::vector<int64_t> rhs_batch_dimensions;
  std::vector<int64_t> lhs_contracting_dimensions;
  std::vector<int64_t> rhs_contracting_dimensions;
};

// slice={[start:limit:stride], ...}; stride defaults to 1.
struct SliceDimension {
  int64_t start = 0;
  int64_t limit = 0;
  int64_t stride = 1;
};

// padding=low_high_interior x ...; interior defaults to 0; low and high may
// be negative.
struct PadDimension {
  int64_t low = 0;
  int64_t high = 0;
  int64_t interior = 0;
};

// The attributes of an instruction that pjrtd uses, parsed. Each field is
// meaningful only for the ops named beside it; the parser leaves the others
// at their defaults. `has` tells which attributes were present.
struct Attributes {
  int64_t parameter_number = -1;  // parameter
  Literal literal;                // constant
  int64_t iota_dimension = 0;     // iota
  // broadcast, transpose, reverse, reduce, concatenate ({d}), all-gather,
  // reduce-scatter and all-to-all ({d}), sort ({d}).
  std::vector<int64_t> dimensions;
  ComparisonDirection comparison_direction = ComparisonDirection::kEq;
  ComparisonType comparison_type = ComparisonType::kDefault;
  DotDimensionNumbers dot_dimension_numbers;  // dot
  std::vector<SliceDimension> slice;          // slice
  std::vector<PadDimension> padding;          // pad
  std::vector<int64_t> dynamic_slice_sizes;   // dynamic-slice
  int64_t tuple_index = 0;                    // get-tuple-element (index=)
  int64_t exponent_bits = 0;                  // reduce-precision
  int64_t mantissa_bits = 0;                  // reduce-precision
  std::string custom_call_target;             // custom-call
  std::optional<int64_t> channel_id;          // collectives
  // replica_groups={{0,1},{2,3}} or the iota form [G,S]<=[N] (with an
  // optional T(perm)), expanded to explicit groups.
  std::vector<std::vector<int64_t>> replica_groups;
  bool use_global_device_ids = false;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
  bool is_stable = false;  // sort

  // Names of the attributes present, in the order written.
  std::vector<std::string> present;
  // Every attribute as written: name and raw value text (what follows '=').
  std::vector<std::pair<std::string, std::string>> raw;

  bool has(absl::string_view name) const;
  // The raw text of attribute `name`, or nullptr.
  const std::string* FindRaw(absl::string_view name) const;
};

class Instruction {
 public:
  Instruction(std::string name, Opcode opcode, std::string opcode_name,
              Shape shape)
      : name_(std::move(name)),
        opcode_(opcode),
        opcode_name_(std::move(opcode_name)),
        shape_(std::move(shape)) {}
  Instruction(const Instruction&) = delete;
  Instruction& operator=(const Instruction&) = delete;

  // Without the leading '%'.
  const std::string& name() const { return name_; }
  Opcode opcode() const { return opcode_; }
  // The spelling in the text ("all-reduce-start" for an unknown op).
  const std::string& opcode_name() const { return opcode_name_; }
  const Shape& shape() const { return shape_; }

  absl::Span<Instruction* const> operands() const { return operands_; }
  Instruction* operand(int i) const { return operands_[i]; }
  int operand_count() const { return static_cast<int>(operands_.size()); }
  void AddOperand(Instruction* operand) { operands_.push_back(operand); }
  void ReplaceOperand(int i, Instruction* operand) { operands_[i] = operand; }
  void SetOperands(std::vector<Instruction*> operands) {
    operands_ = std::move(operands);
  }

  // Computations this instruction calls: to_apply= (reduce, all-reduce,
  // map...), calls= (call, fusion, custom-call), condition= then body=
  // (while), branch_computations= or true_computation= then
  // false_computation= (conditional), comparator (sort), select= then
  // scatter= (select-and-scatter), in that order.
  const std::vector<Computation*>& called_computations() const {
    return called_;
  }
  void AddCalledComputation(Computation* c) { called_.push_back(c); }

  const Attributes& attributes() const { return attributes_; }
  Attributes* mutable_attributes() { return &attributes_; }

  Computation* parent() const { return parent_; }
  void set_parent(Computation* parent) { parent_ = parent; }

  // Where the instruction's name starts in the text (1-based).
  int line() const { return line_; }
  int column() const { return column_; }
  void set_position(int line, int column) {
    line_ = line;
    column_ = column;
  }

  // Where the op this instruction came from was written in the user's
  // source ("model.py:12:3"), when the program said (StableHLO's loc(...)).
  const std::string& source_location() const { return source_location_; }
  void set_source_location(std::string location) {
    source_location_ = std::move(location);
  }

  // "%add.3 (line 12)", for messages.
  std::string Describe() const;

 private:
  std::string name_;
  Opcode opcode_;
  std::string opcode_name_;
  Shape shape_;
  std::vector<Instruction*> operands_;
  std::vector<Computation*> called_;
  Attributes attributes_;
  Computation* parent_ = nullptr;
  int line_ = 0;
  int column_ = 0;
  std::string source_location_;
};

class Computation {
 public:
  explicit Computation(std::string name) : name_(std::move(name)) {}
  Computation(const Computation&) = delete;
  Computation& operator=(const Computation&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // In the order written.
  const std::vector<std::unique_ptr<Instruction>>& instructions() const {
    return instructions_;
  }
  Instruction* AddInstruction(std::unique_ptr<Instruction> instruction);
  // Deletes `instruction`, which nothing may use any more (no operand, not
  // the root, not a parameter).
  void RemoveInstruction(const Instruction* instruction);

  // parameters()[i] has parameter_number i (the parser checks there are no
  // gaps or duplicates).
  const std::vector<Instruction*>& parameters() const { return parameters_; }
  std::vector<Instruction*>* mutable_parameters() { return &parameters_; }

  // ROOT, or the last instruction when none is marked.
  Instruction* root() const { return root_; }
  void set_root(Instruction* root) { root_ = root; }

  bool is_entry() const { return is_entry_; }
  void set_is_entry(bool is_entry) { is_entry_ = is_entry; }

  int line() const { return line_; }
  void set_line(int line) { line_ = line; }

  // The instruction named `name` (without '%'), or nullptr.
  Instruction* FindInstruction(absl::string_view name) const;

  // The instructions the root depends on, and the root, each once, every
  // one after its operands (depth first, operands in order). Iterative:
  // programs can be deep. REQUIRES: no cycles (the verifier's check).
  std::vector<const Instruction*> PostOrder() const;

  // Makes every user of `old` (and the root, if it is `old`) use
  // `replacement` instead. `old` stays in the computation, unused.
  void ReplaceUses(const Instruction* old, Instruction* replacement);

 private:
  std::string name_;
  std::vector<std::unique_ptr<Instruction>> instructions_;
  std::vector<Instruction*> parameters_;
  Instruction* root_ = nullptr;
  bool is_entry_ = false;
  int line_ = 0;
};

// input_output_alias={ {out_index}: (param, {param_index}, kind) }.
struct InputOutputAlias {
  std::vector<int64_t> output_index;
  int64_t parameter_number = 0;
  std::vector<int64_t> parameter_index;
  bool must_alias = false;  // "must-alias"; default "may-alias"
};

// Most replicas, partitions, and replicas x partitions a program may have
// (the devices one launch can span).
inline constexpr int64_t kMaxProgramDevices = int64_t{1} << 16;

struct ModuleConfig {
  int64_t replica_count = 1;
  int64_t num_partitions = 1;
  std::vector<InputOutputAlias> input_output_aliases;
  // entry_computation_layout={(params)->result}, with layouts, if given.
  std::optional<std::vector<Shape>> entry_parameter_layouts;
  std::optional<Shape> entry_result_layout;
  // Every header attribute as written: name and raw value text.
  std::vector<std::pair<std::string, std::string>> raw;
};

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  // In the order written.
  const std::vector<std::unique_ptr<Computation>>& computations() const {
    return computations_;
  }
  Computation* AddComputation(std::unique_ptr<Computation> computation);
  // Every computation, in order, leaving the module empty (no entry).
  std::vector<std::unique_ptr<Computation>> TakeComputations();
  // ENTRY, or the last computation when none is marked.
  Computation* entry() const { return entry_; }
  void set_entry(Computation* entry) { entry_ = entry; }
  Computation* FindComputation(absl::string_view name) const;

  const ModuleConfig& config() const { return config_; }
  ModuleConfig* mutable_config() { return &config_; }

 private:
  std::string name_;
  std::vector<std::unique_ptr<Computation>> computations_;
  Computation* entry_ = nullptr;
  ModuleConfig config_;
};

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_IR_H_
