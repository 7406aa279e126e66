#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/hash/hash.h"
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
  if (session->whole_cluster() && cluster_->multi_task()) {
    auto task = cluster_->TaskOfDevice(request.device_id());
    if (task.ok() && *task != cluster_->task_id()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Execute runs programs on this task's devices; device %d is task "
          "%d's: run it there with ExecuteReplicated (a program compiled "
          "with that device in its assignment)",
          request.device_id(), *task));
    }
  }
  PJRT_ASSIGN_OR_RETURN(
      runtime::Device * device,
      LookupAddressableDevice(*client_, *cluster_, request.device_id()));
  runtime::Executable& e = *executable;
  const auto& result_handles = request.result_handles();
  if (!result_handles.empty()) {
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
    PJRT_RETURN_IF_ERROR(session->CheckNewHandles(result_handles));
  }

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
  // With tenants, executions take turns on each device, and count against
  // the tenant's queued_executions quota until they finish. A run of a
  // program over several devices is not held back: it may wait for its
  // peers on other devices, which would then wait for it in their queues.
  struct QueuedRun {
    FairQueue::Ticket ticket;
    std::shared_ptr<TenantAccount> account;
    int device = -1;
    ~QueuedRun() {
      ticket.Release();
      if (account != nullptr) account->GiveQueuedExecution(device);
    }
  };
  std::shared_ptr<QueuedRun> queued;
  const bool single_device =
      e.portable() || e.num_replicas() * e.num_partitions() == 1;
  if (const auto& account = session->account();
      account != nullptr && single_device) {
    const int ordinal = device->local_hardware_id();
    absl::Status quota = account->TakeQueuedExecution(ordinal);
    if (!quota.ok()) {
      Audit("quota_refused", {{"tenant", account->name()},
                              {"session", absl::StrCat(session->public_id())},
                              {"reason", std::string(quota.message())}});
      return quota;
    }
    queued = std::make_shared<QueuedRun>();
    queued->account = account;
    queued->device = ordinal;
    PJRT_ASSIGN_OR_RETURN(queued->ticket,
                          fair_queues_[static_cast<size_t>(ordinal)]->Enter(
                              account.get(), account->weight(), call.get()));
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
  // The runtime's errors name the executable, the argument and what was
  // expected.
  absl::StatusOr<std::vector<std::shared_ptr<runtime::Buffer>>> results;
  if (e.portable()) {
    results = e.ExecutePortable(raw_arguments, device, options);
  } else if (e.num_replicas() * e.num_partitions() == 1) {
    results = e.Execute(raw_arguments, device, options);
  } else {
    results = e.ExecuteSharded(raw_arguments, device, options);
  }
  if (!results.ok()) return results.status();
  if (queued != nullptr && !results->empty()) {
    // Every result of a run is defined by the same event: the first
    // array's readiness is the run's end (a tuple's OnReady would block).
    runtime::Buffer* first = results->front().get();
    while (first->is_tuple() && !first->tuple_elements().empty()) {
      first = first->tuple_elements().front().get();
    }
    if (!first->is_tuple()) first->OnReady([queued](absl::Status) {});
  }
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
    absl::Status status =
        session->AddBuffersWithHandles(result_handles, *results);
    if (!status.ok()) {
      for (const auto& result : *results) result->Delete();
      return status;
    }
    for (size_t i = 0; i < results->size(); ++i) {
      BufferInfoToProto(*session, result_handles[static_cast<int>(i)],
                        *(*results)[i], infos->Add());
    }
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
  PJRT_ASSIGN_OR_RETURN(auto results,
                        e.ExecuteReplicated(raw_arguments, options));
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

namespace {

// Every handle a result names: its own and its tuple elements'.
void CollectHandles(const v1::BufferInfo& info, std::vector<uint64_t>* out) {
  out->push_back(info.handle());
  for (const v1::BufferInfo& element : info.tuple_elements()) {
    CollectHandles(element, out);
  }
}

void CollectHandles(const v1::ExecuteReplicatedResponse& response,
                    std::vector<uint64_t>* out) {
  for (const v1::ResultList& list : response.results()) {
    for (const v1::BufferInfo& info : list.results()) CollectHandles(info, out);
  }
}

}  // namespace

absl::Status ExecutableService::CompileOnOtherTasks(
    grpc::ServerContext* context, const std::shared_ptr<Session>& session,
    const v1::CompileRequest& request, const runtime::Executable& executable,
    v1::CompileResponse* response) {
  // Every device of the assignment in replica-major order: the order of
  // ExecuteReplicated's argument lists; each task's own list keeps it.
  std::vector<int> order;
  std::vector<int> tasks;
  for (const auto& row : executable.device_assignment()) {
    for (int id : row) {
      PJRT_ASSIGN_OR_RETURN(int task, cluster_->TaskOfDevice(id));
      order.push_back(id);
      if (task != cluster_->task_id() &&
          std::find(tasks.begin(), tasks.end(), task) == tasks.end()) {
        tasks.push_back(task);
      }
    }
  }
  if (tasks.empty()) return absl::OkStatus();
  // Every task compiles at once.
  struct Part {
    int task;
    uint64_t proxy = 0;
    std::unique_ptr<grpc::ClientContext> context;
    v1::CompileRequest request;
    v1::CompileResponse response;
    absl::Status status;
  };
  std::vector<Part> parts(tasks.size());
  pjrt::Mutex mu;
  int pending = 0;
  // However this function ends, no callback may outlive what it uses.
  absl::Cleanup wait_for_parts = [&] {
    pjrt::MutexLock lock(&mu);
    mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; });
  };
  for (size_t i = 0; i < tasks.size(); ++i) {
    Part& part = parts[i];
    part.task = tasks[i];
    auto proxy = proxies_->ProxyOf(session, part.task);
    if (!proxy.ok()) {
      part.status = proxy.status();
      continue;
    }
    part.proxy = *proxy;
    part.request = request;
    part.request.set_session_id(*proxy);
    // The assignment this task settled on (a default one is this task's
    // choice), spelled out.
    v1::CompileOptions* options = part.request.mutable_options();
    options->set_num_replicas(executable.num_replicas());
    options->set_num_partitions(executable.num_partitions());
    options->clear_device_assignment();
    for (int id : order) options->add_device_assignment(id);
    part.context = proxies_->Context(context);
    {
      pjrt::MutexLock lock(&mu);
      ++pending;
    }
    proxies_->Stub(part.task)->async()->ProxyCompile(
        part.context.get(), &part.request, &part.response,
        [this, &mu, &pending, &part](grpc::Status status) {
          absl::Status error;
          if (!status.ok()) error = proxies_->PeerError(part.task, status);
          pjrt::MutexLock lock(&mu);
          part.status = std::move(error);
          --pending;
        });
  }
  {
    pjrt::MutexLock lock(&mu);
    mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; });
  }
  absl::Status failed;
  absl::flat_hash_map<int, uint64_t> handles;
  for (Part& part : parts) {
    if (!part.status.ok()) {
      if (failed.ok()) {
        failed =
            absl::Status(part.status.code(),
                         absl::StrFormat("compiling the part of task %d: %s",
                                         part.task, part.status.message()));
      }
      continue;
    }
    handles[part.task] = part.response.executable_handle();
  }
  if (!failed.ok()) {
    for (const Part& part : parts) {
      if (!part.status.ok()) continue;
      proxies_
          ->DeleteRemoteExecutable(part.task, part.proxy,
                                   part.response.executable_handle())
          .IgnoreError();  // the proxy frees it when it ends
    }
    return failed;
  }
  session->SetRemoteParts(response->executable_handle(), std::move(handles));
  response->clear_addressable_device_ids();
  for (int id : order) response->add_addressable_device_ids(id);
  return absl::OkStatus();
}

absl::Status ExecutableService::ExecuteOnEveryTask(
    grpc::ServerContext* context, const std::shared_ptr<Session>& session,
    runtime::Executable& e, const absl::flat_hash_map<int, uint64_t>& parts,
    const v1::ExecuteReplicatedRequest& request,
    v1::ExecuteReplicatedResponse* response) {
  const int self = cluster_->task_id();
  std::vector<int> order;
  for (const auto& row : e.device_assignment()) {
    for (int id : row) order.push_back(id);
  }
  if (request.arguments_size() != static_cast<int>(order.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s runs on %d devices of the cluster (ids %s); got %d argument "
        "lists, one per device is needed",
        e.name(), order.size(), absl::StrJoin(order, ", "),
        request.arguments_size()));
  }
  // The launch's id on every task. One the client chose is made this
  // session's own, as the runtime scopes a launch within a task: another
  // session's launch with the same id and program cannot join it.
  int64_t launch_id = request.options().launch_id();
  if (launch_id != 0) {
    launch_id = static_cast<int64_t>(
        absl::HashOf(launch_id, self, session->public_id()) >> 1);
  }
  while (launch_id == 0)
    launch_id = static_cast<int64_t>(SecureRandomId() >> 1);

  // Split the lists by task; where[i]: list i's task and place there.
  // Every argument is checked before any task starts, so that a mistake
  // does not leave the others waiting at the program's collectives.
  struct Part {
    int task;
    std::unique_ptr<grpc::ClientContext> context;
    v1::ExecuteReplicatedRequest request;
    v1::ExecuteReplicatedResponse response;
    absl::Status status;
  };
  v1::ExecuteReplicatedRequest local;
  local.set_session_id(request.session_id());
  local.set_executable_handle(request.executable_handle());
  *local.mutable_options() = request.options();
  local.mutable_options()->set_launch_id(launch_id);
  std::vector<Part> remote;
  absl::flat_hash_map<int, size_t> remote_index;
  std::vector<std::pair<int, int>> where(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    PJRT_ASSIGN_OR_RETURN(int task, cluster_->TaskOfDevice(order[i]));
    const v1::ArgumentList& list = request.arguments(static_cast<int>(i));
    for (int a = 0; a < list.argument_handles_size(); ++a) {
      const uint64_t handle = list.argument_handles(a);
      const int there = session->RemoteBufferTask(handle);
      if (there == task) continue;
      if (there < 0) {
        auto buffer = session->LookupBuffer(handle);
        if (!buffer.ok()) {
          return absl::Status(
              buffer.status().code(),
              absl::StrFormat("device %d (list %d), argument %d: %s", order[i],
                              i, a, buffer.status().message()));
        }
        if (task == self) continue;
      }
      return absl::InvalidArgumentError(absl::StrFormat(
          "device %d (list %d), argument %d: buffer %#x is on task %d, not "
          "on task %d, the task of device %d (put it there)",
          order[i], i, a, handle, there < 0 ? self : there, task, order[i]));
    }
    if (task == self) {
      *local.add_arguments() = list;
      where[i] = {self, local.arguments_size() - 1};
      continue;
    }
    auto part_there = parts.find(task);
    if (part_there == parts.end()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s's part on task %d went when task %d restarted; compile the "
          "program again",
          e.name(), task, task));
    }
    auto [it, added] = remote_index.try_emplace(task, remote.size());
    if (added) {
      remote.push_back(Part{.task = task});
      Part& part = remote.back();
      PJRT_ASSIGN_OR_RETURN(uint64_t proxy, proxies_->ProxyOf(session, task));
      part.request.set_session_id(proxy);
      part.request.set_executable_handle(part_there->second);
      *part.request.mutable_options() = local.options();
    }
    Part& part = remote[it->second];
    *part.request.add_arguments() = list;
    where[i] = {task, part.request.arguments_size() - 1};
  }

  // The other tasks' parts first (they meet this one's at the program's
  // collectives), then this task's, on this thread.
  for (Part& part : remote) part.context = proxies_->Context(context);
  pjrt::Mutex mu;
  int pending = 0;
  // However this function ends, no callback may outlive what it uses.
  absl::Cleanup wait_for_parts = [&] {
    pjrt::MutexLock lock(&mu);
    if (pending > 0) {
      for (Part& part : remote) part.context->TryCancel();
    }
    mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; });
  };
  for (Part& part : remote) {
    {
      pjrt::MutexLock lock(&mu);
      ++pending;
    }
    proxies_->Stub(part.task)->async()->ProxyExecuteReplicated(
        part.context.get(), &part.request, &part.response,
        [this, &mu, &pending, &part](grpc::Status status) {
          absl::Status error;
          if (!status.ok()) error = proxies_->PeerError(part.task, status);
          pjrt::MutexLock lock(&mu);
          if (!error.ok()) {
            part.status = absl::Status(
                error.code(), absl::StrFormat("task %d's part: %s", part.task,
                                              error.message()));
          }
          --pending;
        });
  }
  v1::ExecuteReplicatedResponse here;
  absl::Status status = absl::OkStatus();
  if (local.arguments_size() > 0 || !e.addressable_devices().empty()) {
    status = ExecuteReplicatedHere(context, session, e, local, &here);
  }
  {
    pjrt::MutexLock lock(&mu);
    mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; });
  }
  // A part that failed by itself says more than one that gave up waiting
  // for it at a collective.
  auto waited = [](const absl::Status& s) {
    return absl::IsDeadlineExceeded(s) || absl::IsCancelled(s);
  };
  for (const Part& part : remote) {
    if (!part.status.ok() &&
        (status.ok() || (waited(status) && !waited(part.status)))) {
      status = part.status;
    }
    if (status.ok() &&
        part.response.results_size() != part.request.arguments_size()) {
      status = absl::InternalError(absl::StrFormat(
          "task %d answered for %d devices of %d", part.task,
          part.response.results_size(), part.request.arguments_size()));
    }
  }
  if (status.ok() && here.results_size() != local.arguments_size()) {
    status = absl::InternalError(
        absl::StrFormat("this task ran %d devices of %d", here.results_size(),
                        local.arguments_size()));
  }
  if (status.ok()) {
    for (const Part& part : remote) {
      std::vector<uint64_t> handles;
      CollectHandles(part.response, &handles);
      status = session->AddRemoteBuffers(part.task, handles);
      if (!status.ok()) break;
    }
  }
  if (!status.ok()) {
    // No result survives a launch that failed anywhere.
    std::vector<uint64_t> handles;
    CollectHandles(here, &handles);
    session->Release(handles, {});
    for (const Part& part : remote) {
      std::vector<uint64_t> theirs;
      CollectHandles(part.response, &theirs);
      session->ForgetRemoteBuffers(theirs);
      proxies_
          ->DeleteRemoteBuffers(part.task, part.request.session_id(), theirs)
          .IgnoreError();  // the proxy frees them when it ends
    }
    return status;
  }
  response->set_launch_id(request.options().launch_id() != 0
                              ? request.options().launch_id()
                              : launch_id);
  int64_t inline_bytes = 0;
  for (const auto& [task, index] : where) {
    const v1::ResultList& list =
        task == self ? here.results(index)
                     : remote[remote_index.at(task)].response.results(index);
    v1::ResultList* out = response->add_results();
    *out = list;
    // Each task kept its own replies within the inline limit; together
    // they keep it too (a result without its data is read as usual).
    for (v1::BufferInfo& info : *out->mutable_results()) {
      if (!info.has_data()) continue;
      inline_bytes += static_cast<int64_t>(info.data().size());
      if (inline_bytes > kMaxInlineBytes) info.clear_data();
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
