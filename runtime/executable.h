// Executable: a compiled HLO program, ready to run on the client's devices.
//
// Compile parses the HLO text, verifies it and compiles it for the client's
// platform. Execute enqueues one run on a device and returns the result
// buffers at once: errors that can be seen now (arity, shapes, dtypes,
// devices, deleted inputs) are returned; errors that happen while the
// program runs are bound to the results.
//
// Thread-safe; one Executable may run on several devices at once.
#ifndef PJRT_RUNTIME_EXECUTABLE_H_
#define PJRT_RUNTIME_EXECUTABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "compiler/program.h"
#include "hlo/shape.h"
#include "runtime/buffer.h"
#include "runtime/client.h"

namespace pjrt::runtime {

struct CompileOptions {};

struct ExecuteRunOptions {
  int64_t launch_id = 0;
};


class Executable {
 public:
  // Parse errors and verification errors are INVALID_ARGUMENT with line,
  // column and a caret; unsupported ops are UNIMPLEMENTED naming the op and
  // its line.
  static absl::StatusOr<std::shared_ptr<Executable>> Compile(
      Client* client, absl::string_view hlo_text,
      const CompileOptions& options = {});

  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // The HloModule's name.
  const std::string& name() const { return name_; }
  // Shapes of the entry computation's parameters.
  const std::vector<hlo::Shape>& parameter_shapes() const {
    return parameter_shapes_;
  }
  // One shape per result: the root's, or each element of a tuple root (in
  // order, nested tuples flattened).
  const std::vector<hlo::Shape>& result_shapes() const { return result_shapes_; }
  // True when the root is a tuple (its elements are the results).
  bool result_is_tuple() const { return result_is_tuple_; }
  absl::Duration compile_time() const { return compile_time_; }
  // Scratch memory one run needs on the device.
  int64_t scratch_bytes() const;

  // Enqueues a run on `device` with one argument per parameter.
  // INVALID_ARGUMENT names the argument for wrong arity, shape, dtype or
  // device; FAILED_PRECONDITION for deleted or donated inputs.
  absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> Execute(
      absl::Span<Buffer* const> arguments, Device* device,
      const ExecuteRunOptions& options = {});

 private:
  Executable() = default;

  Client* client_ = nullptr;
  std::string name_;
  std::vector<hlo::Shape> parameter_shapes_;
  std::vector<hlo::Shape> result_shapes_;
  bool result_is_tuple_ = false;
  absl::Duration compile_time_;
  std::shared_ptr<const compiler::Program> program_;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_EXECUTABLE_H_
