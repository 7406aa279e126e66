#include "daemon/cluster.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "daemon/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace pjrt::daemon {
namespace {

// Backoff between handshake attempts with a peer that is not up yet.
constexpr absl::Duration kFirstRetryDelay = absl::Milliseconds(100);
constexpr absl::Duration kMaxRetryDelay = absl::Seconds(2);
// Each handshake attempt.
constexpr absl::Duration kHandshakeTimeout = absl::Seconds(5);
// Peer transfers carry chunks of 1 MiB plus framing; forwarded calls of
// whole-cluster sessions carry what a client's may (programs up to the
// daemon's max_program_bytes, replies with every result of a launch), as
// much as the peer server takes.
constexpr int kMaxPeerMessageBytes = 64 << 20;

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

// A refusal that retrying cannot fix: the peer is up and said no.
bool IsRefusal(const absl::Status& status) {
  return absl::IsUnauthenticated(status) ||
         absl::IsFailedPrecondition(status) ||
         absl::IsInvalidArgument(status) || absl::IsPermissionDenied(status);
}

}  // namespace

bool ProtocolRangesOverlap(uint32_t min_a, uint32_t max_a, uint32_t min_b,
                           uint32_t max_b) {
  return std::max(min_a, min_b) <= std::min(max_a, max_b);
}

Cluster::Cluster(ClusterConfig config, v1::TaskTopology self)
    : config_(std::move(config)), self_(std::move(self)) {
  const int n = task_count();
  pjrt::MutexLock lock(&mu_);
  tasks_.resize(n);
  known_.assign(n, false);
  stubs_.resize(n);
  channels_.resize(n);
  tasks_[config_.task_id] = self_;
  known_[config_.task_id] = true;
  formed_ = n == 1;
}

const std::string& Cluster::address(int task) const {
  static const std::string* const kNone = new std::string();
  if (config_.addresses.empty()) return *kNone;
  return config_.addresses.at(task);
}

bool Cluster::formed() const {
  pjrt::MutexLock lock(&mu_);
  return formed_;
}

void Cluster::PrepareContext(grpc::ClientContext* context) const {
  context->AddMetadata(kClusterSecretMetadata, config_.secret);
}

v1::Peer::Stub* Cluster::PeerStub(int task) {
  pjrt::MutexLock lock(&mu_);
  if (stubs_[task] == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxPeerMessageBytes);
    args.SetMaxSendMessageSize(kMaxPeerMessageBytes);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
    // A window of several chunks keeps the pipe full on fast links.
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kPeerWindowBytes);
    // Retry a peer that was down soon rather than after a long backoff.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    std::shared_ptr<grpc::ChannelCredentials> credentials =
        grpc::InsecureChannelCredentials();
    if (!config_.tls_ca_pem.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = config_.tls_ca_pem;
      credentials = grpc::SslCredentials(ssl);
    }
    auto channel =
        grpc::CreateCustomChannel(config_.addresses[task], credentials, args);
    stubs_[task] = v1::Peer::NewStub(channel);
    channels_[task] = std::move(channel);
  }
  return stubs_[task].get();
}

int Cluster::PeersConnected() {
  int connected = 0;
  for (int task = 0; task < task_count(); ++task) {
    if (task == task_id()) continue;
    PeerStub(task);  // makes the channel
    std::shared_ptr<grpc::Channel> channel;
    {
      pjrt::MutexLock lock(&mu_);
      channel = channels_[task];
    }
    if (channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
      ++connected;
    }
  }
  return connected;
}

absl::Status Cluster::CheckSecret(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kClusterSecretMetadata);
  if (it != metadata.end() && it->second.size() == config_.secret.size() &&
      CRYPTO_memcmp(it->second.data(), config_.secret.data(),
                    config_.secret.size()) == 0) {
    return absl::OkStatus();
  }
  spdlog::warn("refused a peer call from {}: {} cluster secret", context.peer(),
               it == metadata.end() ? "no" : "a wrong");
  return absl::UnauthenticatedError(absl::StrFormat(
      "task %d refused the call: %s cluster secret (every task of a cluster "
      "must be started with the same --cluster-secret-file contents)",
      config_.task_id, it == metadata.end() ? "no" : "wrong"));
}

absl::Status Cluster::CheckHandshake(
    const v1::HandshakeRequest& request) const {
  const v1::TaskTopology& caller = request.caller();
  if (request.expected_task_id() != config_.task_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "task %d expected task %d at %s, but this daemon is task %d: the "
        "tasks disagree on the --cluster order",
        caller.task_id(), request.expected_task_id(), address(config_.task_id),
        config_.task_id));
  }
  std::vector<std::string> theirs(caller.cluster().begin(),
                                  caller.cluster().end());
  if (theirs != config_.addresses) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "task %d was started with --cluster %s but task %d with --cluster "
        "%s; start every task with the same list",
        caller.task_id(), absl::StrJoin(theirs, ","), config_.task_id,
        absl::StrJoin(config_.addresses, ",")));
  }
  if (caller.task_id() < 0 || caller.task_id() >= task_count() ||
      caller.task_id() == config_.task_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a peer calls itself task %d; this cluster has tasks 0 to %d and "
        "this daemon is task %d",
        caller.task_id(), task_count() - 1, config_.task_id));
  }
  if (!ProtocolRangesOverlap(
          caller.protocol_version_min(), caller.protocol_version_max(),
          self_.protocol_version_min(), self_.protocol_version_max())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "task %d (pjrtd %s) speaks protocol revisions %d to %d and task %d "
        "(pjrtd %s) speaks %d to %d; run compatible builds on every task",
        caller.task_id(), caller.build_version(), caller.protocol_version_min(),
        caller.protocol_version_max(), config_.task_id, self_.build_version(),
        self_.protocol_version_min(), self_.protocol_version_max()));
  }
  return absl::OkStatus();
}

absl::Status Cluster::AcceptHandshake(const v1::HandshakeRequest& request) {
  PJRT_RETURN_IF_ERROR(CheckHandshake(request));
  const v1::TaskTopology& caller = request.caller();
  pjrt::MutexLock lock(&mu_);
  const int task = caller.task_id();
  if (!known_[task]) return absl::OkStatus();
  v1::TaskTopology& known = tasks_[task];
  if (known.devices_size() != caller.devices_size() ||
      known.platform() != caller.platform()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "task %d comes back with %d %s device(s), but the cluster formed with "
        "%d %s device(s) there, and every task's device ids depend on it; "
        "restart it as it was, or restart every task",
        task, caller.devices_size(), caller.platform(), known.devices_size(),
        known.platform()));
  }
  if (known.incarnation() != caller.incarnation()) {
    spdlog::info("task {} restarted (new incarnation)", task);
    known.set_incarnation(caller.incarnation());
  }
  return absl::OkStatus();
}

absl::Status Cluster::HandshakeWith(int task, absl::Duration timeout,
                                    v1::TaskTopology* callee) {
  v1::HandshakeRequest request;
  *request.mutable_caller() = self_;
  request.set_expected_task_id(task);
  v1::HandshakeResponse response;
  grpc::ClientContext context;
  PrepareContext(&context);
  context.set_deadline(Deadline(timeout));
  grpc::Status status = PeerStub(task)->Handshake(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  const v1::TaskTopology& them = response.callee();
  if (them.task_id() != task) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the daemon at %s is task %d, not task %d: the tasks disagree on the "
        "--cluster order",
        config_.addresses[task], them.task_id(), task));
  }
  if (!ProtocolRangesOverlap(
          them.protocol_version_min(), them.protocol_version_max(),
          self_.protocol_version_min(), self_.protocol_version_max())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "task %d (pjrtd %s) speaks protocol revisions %d to %d, this task "
        "%d to %d",
        task, them.build_version(), them.protocol_version_min(),
        them.protocol_version_max(), self_.protocol_version_min(),
        self_.protocol_version_max()));
  }
  *callee = them;
  return absl::OkStatus();
}

absl::Status Cluster::Form(const std::function<bool()>& stop) {
  if (formed()) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + config_.form_timeout;
  std::vector<absl::Duration> delay(task_count(), kFirstRetryDelay);
  std::vector<absl::Time> next_try(task_count(), absl::InfinitePast());
  std::vector<std::string> last_error(task_count());
  for (;;) {
    std::vector<int> missing;
    {
      pjrt::MutexLock lock(&mu_);
      for (int task = 0; task < task_count(); ++task) {
        if (!known_[task]) missing.push_back(task);
      }
      if (missing.empty()) {
        formed_ = true;
        break;
      }
    }
    for (int task : missing) {
      if (absl::Now() < next_try[task]) continue;
      v1::TaskTopology callee;
      absl::Status status = HandshakeWith(task, kHandshakeTimeout, &callee);
      if (status.ok()) {
        spdlog::info("task {} at {} joined: {} {} device(s)", task,
                     config_.addresses[task], callee.devices_size(),
                     callee.platform());
        pjrt::MutexLock lock(&mu_);
        tasks_[task] = std::move(callee);
        known_[task] = true;
        continue;
      }
      if (IsRefusal(status)) {
        return absl::FailedPreconditionError(
            absl::StrFormat("task %d at %s refused this task: %s", task,
                            config_.addresses[task], status.message()));
      }
      if (last_error[task] != status.message()) {
        spdlog::info("waiting for task {} at {}: {}", task,
                     config_.addresses[task], status.message());
        last_error[task] = std::string(status.message());
      }
      next_try[task] = absl::Now() + delay[task];
      delay[task] = std::min(delay[task] * 2, kMaxRetryDelay);
    }
    if (stop())
      return absl::CancelledError("stopped while forming the cluster");
    if (absl::Now() >= deadline) {
      std::vector<std::string> silent;
      {
        pjrt::MutexLock lock(&mu_);
        for (int task = 0; task < task_count(); ++task) {
          if (!known_[task]) {
            silent.push_back(absl::StrFormat("task %d at %s (%s)", task,
                                             config_.addresses[task],
                                             last_error[task]));
          }
        }
      }
      return absl::DeadlineExceededError(absl::StrFormat(
          "the cluster did not form within %s; no answer from %s",
          absl::FormatDuration(config_.form_timeout),
          absl::StrJoin(silent, "; ")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<std::string> counts;
  for (int task = 0; task < task_count(); ++task) {
    counts.push_back(std::to_string(first_device_id(task)));
  }
  if (multi_task()) {
    spdlog::info("cluster of {} tasks formed; first device ids by task: {}",
                 task_count(), absl::StrJoin(counts, ", "));
  }
  return absl::OkStatus();
}

uint64_t Cluster::incarnation_of(int task) const {
  pjrt::MutexLock lock(&mu_);
  PJRT_DCHECK(formed_);
  return tasks_[task].incarnation();
}

int Cluster::first_device_id(int task) const {
  pjrt::MutexLock lock(&mu_);
  PJRT_DCHECK(formed_);
  int first = 0;
  for (int t = 0; t < task; ++t) first += tasks_[t].devices_size();
  return first;
}

std::vector<v1::Device> Cluster::AllDevices() const {
  pjrt::MutexLock lock(&mu_);
  PJRT_DCHECK(formed_);
  std::vector<v1::Device> devices;
  int id = 0;
  for (int task = 0; task < task_count(); ++task) {
    for (const v1::Device& local : tasks_[task].devices()) {
      v1::Device device = local;
      device.set_id(id++);
      device.set_task_id(task);
      device.set_platform(tasks_[task].platform());
      device.set_addressable(task == config_.task_id);
      devices.push_back(std::move(device));
    }
  }
  return devices;
}

absl::StatusOr<int> Cluster::TaskOfDevice(int id) const {
  pjrt::MutexLock lock(&mu_);
  int first = 0;
  for (int task = 0; task < task_count(); ++task) {
    int count = tasks_[task].devices_size();
    if (id >= first && id < first + count) return task;
    first += count;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "device %d does not exist; the cluster's devices are 0 to %d", id,
      first - 1));
}

v1::ClusterStatus Cluster::Status(absl::Duration timeout) {
  v1::ClusterStatus status;
  status.set_task_id(config_.task_id);
  for (int task = 0; task < task_count(); ++task) {
    v1::TaskStatus* out = status.add_tasks();
    out->set_task_id(task);
    out->set_address(address(task));
    if (task == config_.task_id) {
      out->set_self(true);
      out->set_reachable(true);
      out->set_device_count(self_.devices_size());
      continue;
    }
    absl::Time start = absl::Now();
    v1::TaskTopology callee;
    absl::Status result = HandshakeWith(task, timeout, &callee);
    out->set_round_trip_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
    out->set_reachable(result.ok());
    if (result.ok()) {
      out->set_device_count(callee.devices_size());
      uint64_t known_incarnation;
      {
        pjrt::MutexLock lock(&mu_);
        known_incarnation = tasks_[task].incarnation();
      }
      if (callee.incarnation() != known_incarnation) {
        out->set_error(
            "the task restarted since the cluster formed; its receives "
            "from before are gone");
      }
    } else {
      out->set_error(std::string(result.message()));
    }
  }
  return status;
}

}  // namespace pjrt::daemon
