#include "runtime/executable.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/compiler.h"
#include "hlo/parser.h"
#include "hlo/verifier.h"
#include "runtime/execute.h"

namespace pjrt::runtime {

absl::StatusOr<std::shared_ptr<Executable>> Executable::Compile(
    Client* client, absl::string_view hlo_text, const CompileOptions& options) {
  const absl::Time start = absl::Now();
  PJRT_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> module,
                        hlo::ParseHloModule(hlo_text));
  PJRT_RETURN_IF_ERROR(hlo::VerifyModule(*module, hlo_text));
  if (!client->platform()->host_can_access_device_memory()) {
    return absl::UnimplementedError(absl::StrFormat(
        "compiling for the %s platform is not supported yet; run pjrtd with "
        "--platform host",
        client->platform_name()));
  }
  PJRT_ASSIGN_OR_RETURN(auto program, compiler::host::CompileForHost(*module));
  std::shared_ptr<Executable> executable(new Executable());
  executable->client_ = client;
  executable->name_ = module->name();
  executable->parameter_shapes_ = program->parameter_shapes();
  executable->result_shapes_ = program->result_shapes();
  executable->result_is_tuple_ = module->entry()->root()->shape().IsTuple();
  executable->program_ = std::move(program);
  executable->compile_time_ = absl::Now() - start;
  return executable;
}

Executable::~Executable() = default;

int64_t Executable::scratch_bytes() const { return program_->scratch_bytes(); }

absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> Executable::Execute(
    absl::Span<Buffer* const> arguments, Device* device,
    const ExecuteRunOptions& options) {
  if (arguments.size() != parameter_shapes_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "executable %s takes %d argument(s), got %d", name_,
        parameter_shapes_.size(), arguments.size()));
  }
  std::vector<ExecuteArgument> args;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const hlo::Shape& want = parameter_shapes_[i];
    const hlo::Shape& got = arguments[i]->shape();
    if (got.element_type() != want.element_type()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "argument %d has dtype %s, but parameter %d of %s is %s", i,
          hlo::PrimitiveTypeName(got.element_type()), i, name_,
          want.ToString()));
    }
    if (got != want) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "argument %d has shape %s, but parameter %d of %s is %s", i,
          got.ToString(), i, name_, want.ToString()));
    }
    args.push_back(ExecuteArgument{.buffer = arguments[i]});
  }
  std::vector<ExecuteResult> results;
  for (const hlo::Shape& shape : result_shapes_) {
    results.push_back(ExecuteResult{.shape = shape});
  }
  std::shared_ptr<const compiler::Program> program = program_;
  Kernel kernel = [program](const KernelArgs& k) {
    compiler::RunContext context;
    context.arguments = k.arguments;
    context.results = k.results;
    context.scratch = k.scratch;
    context.prng_seed = k.prng_seed;
    return program->Run(context);
  };
  ExecuteOptions execute_options;
  execute_options.launch_id = options.launch_id;
  execute_options.scratch_bytes = program_->scratch_bytes();
  return ExecuteOnDevice(client_, device, args, results, std::move(kernel),
                         execute_options);
}

}  // namespace pjrt::runtime
