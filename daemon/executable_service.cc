// The Executables service: compile, run on one device (calls and streams)
// or replicated, delete. Running across a cluster's tasks is in
// executable_service_tasks.cc.
#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "daemon/grpc_status.h"
#include "daemon/proto_convert.h"
#include "daemon/services.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "hlo/stablehlo.h"

namespace pjrt::daemon {
namespace {

// A run of a program whose recent runs took less than this goes on the
// calling thread when the device is idle (see ExecuteOne): the reply waits
// for it, which costs the caller at most this much overlap with its own
// work, and saves two thread switches and, for a caller that then reads or
// waits for the results, a round trip.
constexpr absl::Duration kInlineRunLimit = absl::Milliseconds(2);

// The options as bytes that are equal exactly when the options are.
std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

// `status` with `context` in front of its message, code unchanged.
absl::Status WithContext(const absl::Status& status,
                         absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

// Looks up every handle in `session`; `where` prefixes messages.
absl::Status LookupArguments(
    const Session& session,
    const google::protobuf::RepeatedField<uint64_t>& handles,
    absl::string_view where,
    std::vector<std::shared_ptr<runtime::Buffer>>* keep_alive,
    std::vector<runtime::Buffer*>* arguments) {
  arguments->reserve(handles.size());
  for (int i = 0; i < handles.size(); ++i) {
    auto buffer = session.LookupBuffer(handles[i]);
    if (!buffer.ok()) {
      return WithContext(buffer.status(),
                         absl::StrFormat("%sargument %d", where, i));
    }
    arguments->push_back(buffer->get());
    keep_alive->push_back(*std::move(buffer));
  }
  return absl::OkStatus();
}

// Waits until every result (every element of a tuple) is ready, or the call
// is cancelled. A failed run is not an error here: its error is bound to the
// results, and their descriptions say so.
void AwaitResults(grpc::ServerContext* context,
                  const std::vector<std::shared_ptr<runtime::Buffer>>& results,
                  const Cancellation* session_cancellation) {
  std::vector<runtime::Buffer*> leaves;
  for (const auto& result : results) {
    if (result->is_tuple()) {
      for (const auto& element : result->tuple_elements()) {
        leaves.push_back(element.get());
      }
    } else {
      leaves.push_back(result.get());
    }
  }
  for (runtime::Buffer* leaf : leaves) {
    // A failed run's error stays bound to the leaf: only a cancelled call
    // or session stops the wait. Whether the call was cancelled is asked
    // only of a wait that came back with an error: the question polls
    // gRPC's completion queue, tens of microseconds each time.
    absl::Status status = AwaitReady(context, *leaf, absl::InfiniteDuration(),
                                     session_cancellation);
    if (!status.ok() && ((context != nullptr && context->IsCancelled()) ||
                         IsCancelled(session_cancellation))) {
      return;
    }
  }
}

// Registers `results` in `session` and describes them in `infos`. If the
// session closed meanwhile (freeing those registered so far), frees the rest.
absl::Status RegisterResults(
    Session& session, std::vector<std::shared_ptr<runtime::Buffer>>& results,
    google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos) {
  for (size_t i = 0; i < results.size(); ++i) {
    auto handle = session.AddBuffer(results[i]);
    if (!handle.ok()) {
      for (size_t j = i; j < results.size(); ++j) results[j]->Delete();
      return handle.status();
    }
    BufferInfoToProto(session, *handle, *results[i], infos->Add());
  }
  return absl::OkStatus();
}

// Copies the contents of the defined, error-free array results into their
// descriptions, in order, while their total stays within kMaxInlineBytes.
// Returns the bytes copied.
int64_t FetchResults(
    const std::vector<std::shared_ptr<runtime::Buffer>>& results,
    google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos) {
  int64_t total = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    runtime::Buffer& result = *results[i];
    v1::BufferInfo& info = (*infos)[static_cast<int>(i)];
    if (result.is_tuple() || !info.ready() || info.error_code() != 0) continue;
    const int64_t size = result.size_bytes();
    if (size > kMaxInlineBytes - total) continue;
    std::string* data = info.mutable_data();
    if (size == 0) continue;
    data->resize(static_cast<size_t>(size));
    absl::Status copied = result.CopyRawToHost(data->data(), 0, size);
    if (!copied.ok()) {
      // Defined without error a moment ago; a failure now is the copy's.
      info.clear_data();
      continue;
    }
    total += size;
  }
  return total;
}

// Execute runs programs on this task's devices: in a whole-cluster session,
// FAILED_PRECONDITION for a device of another task.
absl::Status CheckDeviceOfThisTask(const Cluster& cluster,
                                   const Session& session, int device_id) {
  if (session.whole_cluster() && cluster.multi_task()) {
    auto task = cluster.TaskOfDevice(device_id);
    if (task.ok() && *task != cluster.task_id()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Execute runs programs on this task's devices; device %d is task "
          "%d's: run it there with ExecuteReplicated (a program compiled "
          "with that device in its assignment)",
          device_id, *task));
    }
  }
  return absl::OkStatus();
}

// The request's result_handles, when it has some: one new handle per
// result of `e`.
absl::Status CheckResultHandles(const Session& session,
                                const runtime::Executable& e,
                                const v1::ExecuteRequest& request) {
  const auto& result_handles = request.result_handles();
  if (result_handles.empty()) return absl::OkStatus();
  if (request.options().keep_tuple_result()) {
    return absl::InvalidArgumentError(
        "result_handles name one buffer per result; they cannot be used "
        "with keep_tuple_result");
  }
  if (result_handles.size() != static_cast<int>(e.result_shapes().size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s has %d results; got %d result_handles", e.name(),
                        e.result_shapes().size(), result_handles.size()));
  }
  return session.CheckNewHandles(result_handles);
}

// With tenants, executions take turns on each device, and count against
// the tenant's queued_executions quota until they finish: a run holds its
// turn and its count while this lives.
struct QueuedRun {
  FairQueue::Ticket ticket;
  std::shared_ptr<TenantAccount> account;
  int device = -1;
  ~QueuedRun() {
    ticket.Release();
    if (account != nullptr) account->GiveQueuedExecution(device);
  }
};

// A run of `session` on `device` takes its turn there (see QueuedRun); the
// quota's refusal is audited. Null when the session has no tenant account.
absl::StatusOr<std::shared_ptr<QueuedRun>> TakeTurn(
    const Session& session, const runtime::Device& device,
    const std::vector<std::unique_ptr<FairQueue>>& fair_queues,
    const Cancellation* call) {
  const auto& account = session.account();
  if (account == nullptr) return std::shared_ptr<QueuedRun>();
  const int ordinal = device.local_hardware_id();
  absl::Status quota = account->TakeQueuedExecution(ordinal);
  if (!quota.ok()) {
    Audit("quota_refused", {{"tenant", account->name()},
                            {"session", absl::StrCat(session.public_id())},
                            {"reason", std::string(quota.message())}});
    return quota;
  }
  auto queued = std::make_shared<QueuedRun>();
  queued->account = account;
  queued->device = ordinal;
  PJRT_ASSIGN_OR_RETURN(queued->ticket,
                        fair_queues[static_cast<size_t>(ordinal)]->Enter(
                            account.get(), account->weight(), call));
  return queued;
}

// `held` (a turn of the fair queue, a quota hold) lives until the run whose
// `results` these are has ended.
void HoldUntilRunEnds(
    const std::shared_ptr<void>& held,
    const std::vector<std::shared_ptr<runtime::Buffer>>& results) {
  if (results.empty()) return;
  // Every result of a run is defined by the same event: the first
  // array's readiness is the run's end (a tuple's OnReady would block).
  runtime::Buffer* first = results.front().get();
  while (first->is_tuple() && !first->tuple_elements().empty()) {
    first = first->tuple_elements().front().get();
  }
  if (!first->is_tuple()) first->OnReady([held](absl::Status) {});
}

// Runs `e` on `device` the way its compile asks for. The runtime's errors
// name the executable, the argument and what was expected.
absl::StatusOr<std::vector<std::shared_ptr<runtime::Buffer>>> Launch(
    runtime::Executable& e, absl::Span<runtime::Buffer* const> arguments,
    runtime::Device* device, const runtime::ExecuteRunOptions& options) {
  if (e.portable()) return e.ExecutePortable(arguments, device, options);
  if (e.num_replicas() * e.num_partitions() == 1) {
    return e.Execute(arguments, device, options);
  }
  return e.ExecuteSharded(arguments, device, options);
}

// Registers `results` in `session` under `handles` (one per result) and
// describes them in `infos`. On an error none is registered, and all are
// freed.
absl::Status RegisterResultsAs(
    Session& session, const google::protobuf::RepeatedField<uint64_t>& handles,
    const std::vector<std::shared_ptr<runtime::Buffer>>& results,
    google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos) {
  absl::Status status = session.AddBuffersWithHandles(handles, results);
  if (!status.ok()) {
    for (const auto& result : results) result->Delete();
    return status;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    BufferInfoToProto(session, handles[static_cast<int>(i)], *results[i],
                      infos->Add());
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status ExecutableService::CompileImpl(grpc::ServerContext* context,
                                            const v1::CompileRequest* request,
                                            v1::CompileResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  const std::string& text = request->hlo_text();
  if (static_cast<int64_t>(text.size()) > limits_.max_program_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("hlo_text has %d bytes; programs may have at most %d "
                        "(the daemon's max_program_bytes)",
                        text.size(), limits_.max_program_bytes));
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return absl::InvalidArgumentError(
        "hlo_text is empty; send the program's text: StableHLO as "
        "jax.jit(f).lower(...).as_text() prints it, or HLO text as XLA's "
        "HloModule::ToString() prints it");
  }
  auto options = CompileOptionsFromProto(request->options(),
                                         limits_.max_collective_timeout);
  if (!options.ok()) return options.status();
  if (cluster_->multi_task()) {
    // An assignment may name the devices of other tasks; this task runs
    // the part on its own.
    for (const v1::Device& device : cluster_->AllDevices()) {
      if (device.addressable()) continue;
      options->remote_devices.push_back({.id = device.id(),
                                         .task_id = device.task_id(),
                                         .platform = device.platform()});
    }
  }
  // Programs differ by backend, device kind and compiler target too. Tenants
  // do not share compiled programs: a cache hit would tell one tenant what
  // another compiled, and one tenant's programs would evict another's.
  std::string scope =
      client_->backend().ok() ? (*client_->backend())->fingerprint() : "";
  if (const auto& account = (*session)->account(); account != nullptr) {
    absl::StrAppend(&scope, "\ntenant=", account->name());
  }
  // A whole-cluster session's programs default to the cluster's devices.
  if (cluster_->multi_task() && (*session)->whole_cluster()) {
    options->whole_cluster = true;
    absl::StrAppend(&scope, "\nwhole_cluster");
  }
  // The key names the format the text is read as, so that a program
  // compiled with its format given and one left to detection share it.
  v1::CompileOptions keyed = request->options();
  if (keyed.program_format() == v1::PROGRAM_FORMAT_UNSPECIFIED) {
    keyed.set_program_format(hlo::DetectProgramFormat(text) ==
                                     hlo::ProgramFormat::kStableHlo
                                 ? v1::PROGRAM_FORMAT_STABLEHLO
                                 : v1::PROGRAM_FORMAT_HLO);
  }
  std::string key = CompileCacheKey(text, DeterministicBytes(keyed), scope);
  std::string owner;
  int owner_capacity = 0;
  if (const auto& account = (*session)->account(); account != nullptr) {
    owner = account->name();
    owner_capacity = static_cast<int>(
        std::min<int64_t>(account->quota().compile_cache_entries, 1 << 30));
  }
  auto compiled = cache_->GetOrCompile(
      key,
      [&]() -> absl::StatusOr<std::shared_ptr<runtime::Executable>> {
        // Wait for a compile slot, as long as the client wants the answer.
        while (!compile_slots_->AcquireFor(1, Cancellation::kPollInterval)) {
          if (context->IsCancelled()) {
            return absl::CancelledError(
                "the call was cancelled while it waited to compile");
          }
        }
        device::Semaphore::ScopedReservation slot(compile_slots_.get(), 1);
        const absl::Time start = absl::Now();
        auto executable = runtime::Executable::Compile(client_, text, *options);
        if (metrics_ != nullptr) metrics_->RecordCompile(absl::Now() - start);
        return executable;
      },
      owner, owner_capacity);
  if (!compiled.ok()) {
    spdlog::info("{}: compile of a {}-byte program failed: {}",
                 (*session)->DebugString(), text.size(),
                 EscapeForLog(compiled.status().ToString()));
    return compiled.status();
  }
  const runtime::Executable& executable = *compiled->value;
  auto handle = (*session)->AddExecutable(compiled->value);
  if (!handle.ok()) return handle.status();

  response->set_executable_handle(*handle);
  response->set_name(executable.name());
  std::function<void(const hlo::Shape&)> add_leaves =
      [&](const hlo::Shape& shape) {
        if (!shape.IsTuple()) {
          ShapeToProto(shape, response->add_parameter_shapes());
          return;
        }
        for (const hlo::Shape& e : shape.tuple_shapes()) add_leaves(e);
      };
  for (const hlo::Shape& shape : executable.parameter_shapes()) {
    add_leaves(shape);
  }
  response->set_parameter_is_tuple(executable.parameter_shapes().size() == 1 &&
                                   executable.parameter_shapes()[0].IsTuple());
  for (const hlo::Shape& shape : executable.result_shapes()) {
    ShapeToProto(shape, response->add_result_shapes());
  }
  response->set_result_is_tuple(executable.result_is_tuple());
  response->set_compile_seconds(absl::ToDoubleSeconds(compiled->elapsed));
  response->set_cache_hit(compiled->cache_hit);
  response->set_fingerprint(compiled->fingerprint);
  response->set_num_replicas(executable.num_replicas());
  response->set_num_partitions(executable.num_partitions());
  response->set_portable(executable.portable());
  for (const auto& row : executable.device_assignment()) {
    for (int id : row) response->add_device_assignment(id);
  }
  for (const runtime::Device* device : executable.addressable_devices()) {
    response->add_addressable_device_ids(device->id());
  }
  for (int p : executable.donated_parameters()) {
    response->add_donated_parameters(p);
  }
  if (proxies_ != nullptr && (*session)->whole_cluster() &&
      !executable.portable()) {
    absl::Status spanned =
        CompileOnOtherTasks(context, *session, *request, executable, response);
    if (!spanned.ok()) {
      (*session)->DeleteExecutable(*handle).IgnoreError();
      return spanned;
    }
  }
  spdlog::info("{}: compiled {} in {}{} (fingerprint {:.12})",
               (*session)->DebugString(), EscapeForLog(executable.name(), 128),
               absl::FormatDuration(compiled->elapsed),
               compiled->cache_hit ? ", from the cache" : "",
               compiled->fingerprint);
  return absl::OkStatus();
}

absl::Status ExecutableService::ExecuteOne(
    grpc::ServerContext* context, const v1::ExecuteRequest& request,
    bool inline_idle,
    google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos) {
  PJRT_ASSIGN_OR_RETURN(auto session, CallerSession(auth_, sessions_, *context,
                                                    request.session_id()));
  return ExecuteInSession(session, context, /*lane_call=*/nullptr, request,
                          inline_idle, infos);
}

absl::Status ExecutableService::ExecuteOnLane(
    const std::shared_ptr<Session>& session, const v1::ExecuteRequest& request,
    v1::ExecuteResponse* response, std::shared_ptr<Cancellation> call) {
  // As a unary Execute: a lane's caller waits for the reply anyway.
  return ExecuteInSession(session, /*context=*/nullptr, std::move(call),
                          request, /*inline_idle=*/false,
                          response->mutable_results());
}

absl::Status ExecutableService::ExecuteInSession(
    const std::shared_ptr<Session>& session, grpc::ServerContext* context,
    std::shared_ptr<Cancellation> lane_call, const v1::ExecuteRequest& request,
    bool inline_idle,
    google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos) {
  // What the client dropped goes once this run is enqueued (or refused):
  // the run's own lookups below hold what it uses.
  absl::Cleanup release = [&] {
    session->Release(request.release_buffers(), request.release_executables());
  };
  PJRT_ASSIGN_OR_RETURN(auto executable,
                        session->LookupExecutable(request.executable_handle()));
  PJRT_RETURN_IF_ERROR(
      CheckDeviceOfThisTask(*cluster_, *session, request.device_id()));
  PJRT_ASSIGN_OR_RETURN(
      runtime::Device * device,
      LookupAddressableDevice(*client_, *cluster_, request.device_id()));
  runtime::Executable& e = *executable;
  const auto& result_handles = request.result_handles();
  PJRT_RETURN_IF_ERROR(CheckResultHandles(*session, e, request));

  // The shared pointers keep the arguments alive for the call; the runtime's
  // holds protect them while the run is in flight.
  std::vector<std::shared_ptr<runtime::Buffer>> arguments;
  std::vector<runtime::Buffer*> raw_arguments;
  PJRT_RETURN_IF_ERROR(LookupArguments(*session, request.argument_handles(), "",
                                       &arguments, &raw_arguments));

  runtime::ExecuteRunOptions options =
      ExecuteOptionsFromProto(request.options());
  if (options.launch_id == 0) options.launch_id = request.launch_id();
  // The session's runs stop when it closes, and its launches are its own.
  options.cancellation = session->cancellation();
  options.launch_scope = session->public_id();
  options.observer = session->usage();
  PJRT_ASSIGN_OR_RETURN(Session::WaitingCall waiting,
                        MaybeStartWaitingCall(*session, raw_arguments));
  std::shared_ptr<Cancellation> call =
      lane_call != nullptr ? std::move(lane_call)
                           : CallCancellation(context, *session);
  options.wait_cancellation = call.get();
  // A run of a program over several devices does not take turns: it may
  // wait for its peers on other devices, which would then wait for it in
  // their queues.
  std::shared_ptr<QueuedRun> queued;
  const bool single_device =
      e.portable() || e.num_replicas() * e.num_partitions() == 1;
  if (single_device) {
    PJRT_ASSIGN_OR_RETURN(
        queued, TakeTurn(*session, *device, fair_queues_, call.get()));
  }
  // A caller that waits for the results anyway, or that streams its steps
  // (the next request cannot start before this one is enqueued), gains from
  // running the work on this thread while the device is idle: two thread
  // switches fewer per small step. So does one whose program's runs have
  // been short lately, as XLA's CPU client runs cheap computations inline:
  // the reply then says the results are ready, and a read or a wait for
  // them costs no second round trip.
  const bool wait =
      request.options().wait_until_ready() || request.options().fetch_results();
  const bool short_run = single_device && e.recent_run_time() < kInlineRunLimit;
  options.run_inline_when_idle = inline_idle || wait || short_run;
  // The run's scratch memory counts against the tenant's quota until the
  // run ends (its results count once they have handles).
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<void> scratch,
                        session->HoldDeviceMemory(device->local_hardware_id(),
                                                  e.scratch_bytes()));
  absl::StatusOr<std::vector<std::shared_ptr<runtime::Buffer>>> results =
      Launch(e, raw_arguments, device, options);
  if (!results.ok()) return results.status();
  if (queued != nullptr) HoldUntilRunEnds(queued, *results);
  if (scratch != nullptr) HoldUntilRunEnds(scratch, *results);
  if (wait) {
    // A lane's call covers its session's cancellation and its client's
    // hanging up; a gRPC call's context is asked apart (see AwaitResults).
    AwaitResults(
        context, *results,
        context == nullptr ? call.get() : session->cancellation().get());
  }
  if (result_handles.empty()) {
    PJRT_RETURN_IF_ERROR(RegisterResults(*session, *results, infos));
  } else {
    PJRT_RETURN_IF_ERROR(
        RegisterResultsAs(*session, result_handles, *results, infos));
  }
  if (request.options().fetch_results()) {
    const absl::Time start = absl::Now();
    const int64_t bytes = FetchResults(*results, infos);
    if (bytes > 0) {
      RecordTransfer(metrics_, session->usage().get(),
                     TransferDirection::kFromDevice, TransferPath::kStream,
                     bytes, start);
    }
  }
  return absl::OkStatus();
}

absl::Status ExecutableService::ExecuteImpl(grpc::ServerContext* context,
                                            const v1::ExecuteRequest* request,
                                            v1::ExecuteResponse* response) {
  return ExecuteOne(context, *request, /*inline_idle=*/false,
                    response->mutable_results());
}

absl::Status ExecutableService::ExecuteStreamImpl(
    grpc::ServerContext* context,
    const std::function<bool(v1::ExecuteRequest*)>& read,
    const std::function<bool(const v1::ExecuteStreamResponse&)>& write) {
  {
    pjrt::MutexLock lock(&streams_mu_);
    if (streams_ended_) {
      return absl::UnavailableError("pjrtd is shutting down");
    }
    streams_.insert(context);
  }
  struct Unlist {
    ExecutableService* service;
    grpc::ServerContext* context;
    ~Unlist() {
      pjrt::MutexLock lock(&service->streams_mu_);
      service->streams_.erase(context);
    }
  } unlist{this, context};
  // Replies go out from a second thread, so that running request k+1 does
  // not wait for the reply to request k; one reply covers every request
  // run since the previous one.
  pjrt::Mutex mu;
  int64_t done = -1;     // the last request run
  int64_t replied = -1;  // the last request acknowledged
  bool reading = true;
  bool writable = true;
  std::thread writer([&] {
    v1::ExecuteStreamResponse response;
    for (;;) {
      int64_t sequence;
      {
        pjrt::MutexLock lock(&mu);
        auto work = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
          return done > replied || !reading;
        };
        mu.Await(work);
        if (done == replied) return;  // finished and all acknowledged
        sequence = done;
      }
      response.set_sequence(sequence);
      bool ok = write(response);
      pjrt::MutexLock lock(&mu);
      replied = sequence;
      if (!ok) {
        writable = false;
        return;
      }
    }
  });
  absl::Status failure;
  v1::ExecuteRequest request;
  google::protobuf::RepeatedPtrField<v1::BufferInfo> infos;
  for (int64_t sequence = 0; read(&request); ++sequence) {
    absl::Status status;
    if (request.result_handles().empty()) {
      status = absl::InvalidArgumentError(
          "a streamed Execute must carry result_handles (one per result), "
          "so that later requests can name its results");
    } else if (request.options().fetch_results()) {
      status = absl::InvalidArgumentError(
          "fetch_results is for Execute: a streamed request's reply is an "
          "acknowledgement and carries no results; read them with "
          "ReadBuffer or Download");
    } else {
      infos.Clear();
      status = ExecuteOne(context, request, /*inline_idle=*/true, &infos);
    }
    if (!status.ok()) {
      failure = absl::Status(
          status.code(),
          absl::StrFormat("stream request %d: %s", sequence, status.message()));
      break;
    }
    pjrt::MutexLock lock(&mu);
    done = sequence;
    if (!writable) break;
  }
  bool client_gone;
  {
    pjrt::MutexLock lock(&mu);
    reading = false;
    client_gone = !writable;
  }
  writer.join();
  if (!failure.ok()) return failure;
  if (client_gone) {
    return absl::CancelledError("client went away");
  }
  return absl::OkStatus();
}

void ExecutableService::EndStreams() {
  pjrt::MutexLock lock(&streams_mu_);
  streams_ended_ = true;
  for (grpc::ServerContext* context : streams_) context->TryCancel();
}

absl::Status ExecutableService::ExecuteReplicatedImpl(
    grpc::ServerContext* context, const v1::ExecuteReplicatedRequest* request,
    v1::ExecuteReplicatedResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  auto executable = (*session)->LookupExecutable(request->executable_handle());
  if (!executable.ok()) return executable.status();
  if (proxies_ != nullptr) {
    auto parts = (*session)->RemoteParts(request->executable_handle());
    if (parts.has_value()) {
      // A task restarted since the program was compiled loses its part
      // here (and the session's buffers there).
      for (const auto& [task, part] : *parts) {
        auto proxy = proxies_->ProxyOf(*session, task);
        if (!proxy.ok()) return proxy.status();
      }
      parts = (*session)->RemoteParts(request->executable_handle());
      return ExecuteOnEveryTask(
          context, *session, **executable,
          parts.value_or(absl::flat_hash_map<int, uint64_t>()), *request,
          response);
    }
  }
  return ExecuteReplicatedHere(context, *session, **executable, *request,
                               response);
}

absl::Status ExecutableService::ExecuteReplicatedHere(
    grpc::ServerContext* context, const std::shared_ptr<Session>& session,
    runtime::Executable& e, const v1::ExecuteReplicatedRequest& request,
    v1::ExecuteReplicatedResponse* response) {
  const auto& devices = e.addressable_devices();
  if (request.arguments_size() != static_cast<int>(devices.size())) {
    std::vector<int> ids;
    for (const runtime::Device* d : devices) ids.push_back(d->id());
    return absl::InvalidArgumentError(
        absl::StrFormat("%s runs on %d devices (ids %s); got %d argument "
                        "lists, one per device is needed",
                        e.name(), devices.size(), absl::StrJoin(ids, ", "),
                        request.arguments_size()));
  }
  std::vector<std::shared_ptr<runtime::Buffer>> arguments;
  std::vector<std::vector<runtime::Buffer*>> raw_arguments(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    PJRT_RETURN_IF_ERROR(LookupArguments(
        *session, request.arguments(static_cast<int>(d)).argument_handles(),
        absl::StrFormat("device %d (list %d): ", devices[d]->id(), d),
        &arguments, &raw_arguments[d]));
  }
  runtime::ExecuteRunOptions options =
      ExecuteOptionsFromProto(request.options());
  while (options.launch_id == 0) {
    options.launch_id = static_cast<int64_t>(SecureRandomId() >> 1);
  }
  options.cancellation = session->cancellation();
  options.launch_scope = session->public_id();
  options.observer = session->usage();
  std::vector<runtime::Buffer*> all_arguments;
  for (const auto& list : raw_arguments) {
    all_arguments.insert(all_arguments.end(), list.begin(), list.end());
  }
  PJRT_ASSIGN_OR_RETURN(auto waiting,
                        MaybeStartWaitingCall(*session, all_arguments));
  std::shared_ptr<Cancellation> call = CallCancellation(context, *session);
  options.wait_cancellation = call.get();
  // Each device's scratch counts against the tenant's quota until its run
  // ends.
  std::vector<std::shared_ptr<void>> scratch;
  for (runtime::Device* device : e.addressable_devices()) {
    PJRT_ASSIGN_OR_RETURN(scratch.emplace_back(),
                          session->HoldDeviceMemory(device->local_hardware_id(),
                                                    e.scratch_bytes()));
  }
  PJRT_ASSIGN_OR_RETURN(auto results,
                        e.ExecuteReplicated(raw_arguments, options));
  for (size_t d = 0; d < results.size() && d < scratch.size(); ++d) {
    if (scratch[d] != nullptr) HoldUntilRunEnds(scratch[d], results[d]);
  }
  response->set_launch_id(options.launch_id);
  for (size_t d = 0; d < results.size(); ++d) {
    absl::Status status = RegisterResults(
        *session, results[d], response->add_results()->mutable_results());
    if (!status.ok()) {
      for (size_t rest = d + 1; rest < results.size(); ++rest) {
        for (auto& buffer : results[rest]) buffer->Delete();
      }
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status ExecutableService::DeleteExecutableImpl(
    grpc::ServerContext* context, const v1::DeleteExecutableRequest* request,
    v1::DeleteExecutableResponse*) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  absl::Status status =
      (*session)->DeleteExecutable(request->executable_handle());
  if (status.ok() && proxies_ != nullptr) proxies_->FlushReleases(**session);
  return status;
}

}  // namespace pjrt::daemon
