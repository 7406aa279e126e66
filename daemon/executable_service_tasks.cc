// The executable service across a cluster's tasks: a program compiled on
// every task its device assignment names, and run on all of them under one
// launch id, each task's part on its own devices, the results gathered in
// the assignment's order (the rest of the service: executable_service.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "daemon/services.h"

namespace pjrt::daemon {

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

// Every device of `e`'s assignment in replica-major order: the order of
// ExecuteReplicated's argument lists.
std::vector<int> AssignmentOrder(const runtime::Executable& e) {
  std::vector<int> order;
  for (const auto& row : e.device_assignment()) {
    for (int id : row) order.push_back(id);
  }
  return order;
}

// The launch's id on every task. One the client chose is made this
// session's own, as the runtime scopes a launch within a task: another
// session's launch with the same id and program cannot join it.
int64_t LaunchIdOnEveryTask(int64_t chosen, int self, uint64_t session_id) {
  int64_t launch_id = chosen;
  if (launch_id != 0) {
    launch_id =
        static_cast<int64_t>(absl::HashOf(launch_id, self, session_id) >> 1);
  }
  while (launch_id == 0) {
    launch_id = static_cast<int64_t>(SecureRandomId() >> 1);
  }
  return launch_id;
}

// One other task's part of a launch on every task.
struct RemotePart {
  int task;
  std::unique_ptr<grpc::ClientContext> context;
  v1::ExecuteReplicatedRequest request;
  v1::ExecuteReplicatedResponse response;
  absl::Status status;
};

// A launch's argument lists, split by task.
struct LaunchSplit {
  // This task's lists.
  v1::ExecuteReplicatedRequest local;
  // The other tasks' parts, and each one's index in `remote` by task.
  std::vector<RemotePart> remote;
  absl::flat_hash_map<int, size_t> remote_index;
  // where[i]: list i's task and place there.
  std::vector<std::pair<int, int>> where;
};

// Every argument of list `i`, that of `device`, is on `task`, the task of
// the device: a remote buffer of that task, or on this task (`self`) a
// buffer of this one.
absl::Status CheckArgumentsOnTask(const Session& session,
                                  const v1::ArgumentList& list, size_t i,
                                  int device, int task, int self) {
  for (int a = 0; a < list.argument_handles_size(); ++a) {
    const uint64_t handle = list.argument_handles(a);
    const int there = session.RemoteBufferTask(handle);
    if (there == task) continue;
    if (there < 0) {
      auto buffer = session.LookupBuffer(handle);
      if (!buffer.ok()) {
        return absl::Status(
            buffer.status().code(),
            absl::StrFormat("device %d (list %d), argument %d: %s", device, i,
                            a, buffer.status().message()));
      }
      if (task == self) continue;
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d (list %d), argument %d: buffer %#x is on task %d, not "
        "on task %d, the task of device %d (put it there)",
        device, i, a, handle, there < 0 ? self : there, task, device));
  }
  return absl::OkStatus();
}

// Splits `request`'s argument lists (one per device of `order`) by task
// into `split`, each part with `launch_id`. `parts`: the program's handle
// on each other task, whose proxy of `session` each part calls. Every
// argument is checked before any task starts, so that a mistake does not
// leave the others waiting at the program's collectives.
absl::Status SplitByTask(const Cluster& cluster, ProxySessions& proxies,
                         const std::shared_ptr<Session>& session,
                         const runtime::Executable& e,
                         const absl::flat_hash_map<int, uint64_t>& parts,
                         const std::vector<int>& order,
                         const v1::ExecuteReplicatedRequest& request,
                         int64_t launch_id, LaunchSplit* split) {
  const int self = cluster.task_id();
  v1::ExecuteReplicatedRequest& local = split->local;
  local.set_session_id(request.session_id());
  local.set_executable_handle(request.executable_handle());
  *local.mutable_options() = request.options();
  local.mutable_options()->set_launch_id(launch_id);
  std::vector<RemotePart>& remote = split->remote;
  split->where.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    PJRT_ASSIGN_OR_RETURN(int task, cluster.TaskOfDevice(order[i]));
    const v1::ArgumentList& list = request.arguments(static_cast<int>(i));
    PJRT_RETURN_IF_ERROR(
        CheckArgumentsOnTask(*session, list, i, order[i], task, self));
    if (task == self) {
      *local.add_arguments() = list;
      split->where[i] = {self, local.arguments_size() - 1};
      continue;
    }
    auto part_there = parts.find(task);
    if (part_there == parts.end()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s's part on task %d went when task %d restarted; compile the "
          "program again",
          e.name(), task, task));
    }
    auto [it, added] = split->remote_index.try_emplace(task, remote.size());
    if (added) {
      remote.push_back(RemotePart{.task = task});
      RemotePart& part = remote.back();
      PJRT_ASSIGN_OR_RETURN(uint64_t proxy, proxies.ProxyOf(session, task));
      part.request.set_session_id(proxy);
      part.request.set_executable_handle(part_there->second);
      *part.request.mutable_options() = local.options();
    }
    RemotePart& part = remote[it->second];
    *part.request.add_arguments() = list;
    split->where[i] = {task, part.request.arguments_size() - 1};
  }
  return absl::OkStatus();
}

// The launch's outcome from this task's `status` and the other tasks'
// parts: INTERNAL when a task answered for other than its lists. A part
// that failed by itself says more than one that gave up waiting for it at
// a collective.
absl::Status LaunchOutcome(absl::Status status,
                           const std::vector<RemotePart>& remote,
                           const v1::ExecuteReplicatedRequest& local,
                           const v1::ExecuteReplicatedResponse& here) {
  auto waited = [](const absl::Status& s) {
    return absl::IsDeadlineExceeded(s) || absl::IsCancelled(s);
  };
  for (const RemotePart& part : remote) {
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
  return status;
}

// Registers the other tasks' results in `session` as remote buffers.
absl::Status AddRemoteResults(Session& session,
                              const std::vector<RemotePart>& remote) {
  for (const RemotePart& part : remote) {
    std::vector<uint64_t> handles;
    CollectHandles(part.response, &handles);
    PJRT_RETURN_IF_ERROR(session.AddRemoteBuffers(part.task, handles));
  }
  return absl::OkStatus();
}

// No result survives a launch that failed anywhere: frees this task's
// results (`here`) and the other tasks'.
void DiscardResults(Session& session, ProxySessions& proxies,
                    const v1::ExecuteReplicatedResponse& here,
                    const std::vector<RemotePart>& remote) {
  std::vector<uint64_t> handles;
  CollectHandles(here, &handles);
  session.Release(handles, {});
  for (const RemotePart& part : remote) {
    std::vector<uint64_t> theirs;
    CollectHandles(part.response, &theirs);
    session.ForgetRemoteBuffers(theirs);
    proxies.DeleteRemoteBuffers(part.task, part.request.session_id(), theirs)
        .IgnoreError();  // the proxy frees them when it ends
  }
}

// Every list's results, this task's (`here`) and the other tasks', in the
// order of the request's lists.
void GatherResults(const LaunchSplit& split, int self,
                   const v1::ExecuteReplicatedResponse& here,
                   v1::ExecuteReplicatedResponse* response) {
  int64_t inline_bytes = 0;
  for (const auto& [task, index] : split.where) {
    const v1::ResultList& list =
        task == self
            ? here.results(index)
            : split.remote[split.remote_index.at(task)].response.results(index);
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
  const std::vector<int> order = AssignmentOrder(e);
  if (request.arguments_size() != static_cast<int>(order.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s runs on %d devices of the cluster (ids %s); got %d argument "
        "lists, one per device is needed",
        e.name(), order.size(), absl::StrJoin(order, ", "),
        request.arguments_size()));
  }
  const int64_t launch_id = LaunchIdOnEveryTask(request.options().launch_id(),
                                                self, session->public_id());
  LaunchSplit split;
  PJRT_RETURN_IF_ERROR(SplitByTask(*cluster_, *proxies_, session, e, parts,
                                   order, request, launch_id, &split));
  const v1::ExecuteReplicatedRequest& local = split.local;
  std::vector<RemotePart>& remote = split.remote;

  // The other tasks' parts first (they meet this one's at the program's
  // collectives), then this task's, on this thread.
  for (RemotePart& part : remote) part.context = proxies_->Context(context);
  pjrt::Mutex mu;
  int pending = 0;
  // However this function ends, no callback may outlive what it uses.
  absl::Cleanup wait_for_parts = [&] {
    pjrt::MutexLock lock(&mu);
    if (pending > 0) {
      for (RemotePart& part : remote) part.context->TryCancel();
    }
    mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; });
  };
  for (RemotePart& part : remote) {
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
  status = LaunchOutcome(std::move(status), remote, local, here);
  if (status.ok()) status = AddRemoteResults(*session, remote);
  if (!status.ok()) {
    DiscardResults(*session, *proxies_, here, remote);
    return status;
  }
  response->set_launch_id(request.options().launch_id() != 0
                              ? request.options().launch_id()
                              : launch_id);
  GatherResults(split, self, here, response);
  return absl::OkStatus();
}

}  // namespace pjrt::daemon
