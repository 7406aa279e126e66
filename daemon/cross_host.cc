#include "daemon/cross_host.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "daemon/proto_convert.h"

namespace pjrt::daemon {
namespace {

constexpr absl::string_view kMagic = "PJXD";
constexpr size_t kTokenBytes = 16;
// Ended receives remembered for the reasons of late descriptors.
constexpr size_t kEndedMemory = 65536;

std::string RandomToken() {
  std::string token(kTokenBytes, '\0');
  for (size_t i = 0; i < kTokenBytes; i += sizeof(uint64_t)) {
    uint64_t value = SecureRandomId();
    std::memcpy(token.data() + i, &value, sizeof(value));
  }
  return token;
}

std::string FormatUtc(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

}  // namespace

std::string SerializeDescriptor(const v1::CrossHostDescriptor& descriptor) {
  std::string bytes(kMagic);
  descriptor.AppendToString(&bytes);
  return bytes;
}

absl::StatusOr<v1::CrossHostDescriptor> ParseDescriptor(
    absl::string_view bytes) {
  if (!absl::StartsWith(bytes, kMagic)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "malformed descriptor: %d bytes that do not start with \"PJXD\"; pass "
        "the bytes that MakeCrossHostReceiveBuffers returned, unchanged",
        bytes.size()));
  }
  bytes.remove_prefix(kMagic.size());
  v1::CrossHostDescriptor descriptor;
  if (!descriptor.ParseFromArray(bytes.data(),
                                 static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        "malformed descriptor: its body does not parse (truncated or "
        "altered?)");
  }
  if (descriptor.version() == 0) {
    return absl::InvalidArgumentError(
        "malformed descriptor: it has no version (empty or altered?)");
  }
  if (descriptor.version() != kDescriptorVersion) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "descriptor version %d is not one this pjrtd reads (it reads version "
        "%d); send it to a task of the same release",
        descriptor.version(), kDescriptorVersion));
  }
  if (descriptor.token().size() != kTokenBytes ||
      descriptor.receive_id() == 0 || !descriptor.has_shape() ||
      descriptor.expires_unix_micros() <= 0) {
    return absl::InvalidArgumentError(
        "malformed descriptor: a token, receive id, shape or expiry is "
        "missing");
  }
  return descriptor;
}

CrossHostReceives::CrossHostReceives(runtime::Client* client, int task_id,
                                     uint64_t incarnation)
    : client_(client), task_id_(task_id), incarnation_(incarnation) {}

CrossHostReceives::~CrossHostReceives() {
  pjrt::MutexLock lock(&mu_);
  for (auto& [id, pending] : pending_) {
    pending.transfer->Fail(absl::UnavailableError(
        "the receive ended without data: pjrtd is shutting down"));
  }
  pending_.clear();
}

absl::StatusOr<CrossHostReceives::Made> CrossHostReceives::Make(
    absl::Span<const hlo::Shape> shapes, runtime::Device* device,
    absl::Duration timeout) {
  if (shapes.empty()) {
    return absl::InvalidArgumentError("no shapes given: nothing to receive");
  }
  const absl::Time expiry = absl::Now() + timeout;
  std::vector<Pending> made;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i].IsArray()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shape %d is %s; receive buffers are arrays", i,
                          shapes[i].ToString()));
    }
    // Earlier transfers of `made` are aborted (memory returned) on error.
    PJRT_ASSIGN_OR_RETURN(
        auto transfer, client_->CreateHostToDeviceTransfer(shapes[i], device));
    made.push_back(Pending{.transfer = std::move(transfer),
                           .token = RandomToken(),
                           .shape = shapes[i],
                           .device_id = device->id(),
                           .expiry = expiry});
  }
  Made out;
  pjrt::MutexLock lock(&mu_);
  for (Pending& pending : made) {
    uint64_t id = SecureRandomId();
    while (pending_.contains(id) || ended_.contains(id)) id = SecureRandomId();
    v1::CrossHostDescriptor descriptor;
    descriptor.set_version(kDescriptorVersion);
    descriptor.set_task_id(task_id_);
    descriptor.set_incarnation(incarnation_);
    descriptor.set_device_id(pending.device_id);
    descriptor.set_receive_id(id);
    descriptor.set_token(pending.token);
    ShapeToProto(pending.shape, descriptor.mutable_shape());
    descriptor.set_expires_unix_micros(absl::ToUnixMicros(expiry));
    out.buffers.push_back(pending.transfer->buffer());
    out.descriptors.push_back(SerializeDescriptor(descriptor));
    pending_.emplace(id, std::move(pending));
  }
  return out;
}

void CrossHostReceives::RememberEnded(uint64_t id, std::string reason) {
  if (ended_.insert_or_assign(id, std::move(reason)).second) {
    ended_order_.push_back(id);
  }
  while (ended_order_.size() > kEndedMemory) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

absl::StatusOr<CrossHostReceives::Claimed> CrossHostReceives::Claim(
    const v1::CrossHostDescriptor& descriptor) {
  if (descriptor.task_id() != task_id_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the descriptor names task %d, but this is task %d",
                        descriptor.task_id(), task_id_));
  }
  if (descriptor.incarnation() != incarnation_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the descriptor was made by an earlier run of task %d, which has "
        "restarted since; its receive is gone",
        task_id_));
  }
  pjrt::MutexLock lock(&mu_);
  const uint64_t id = descriptor.receive_id();
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    auto ended = ended_.find(id);
    if (ended != ended_.end()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "receive %#x %s; a descriptor works once", id, ended->second));
    }
    return absl::PermissionDeniedError(absl::StrFormat(
        "task %d never made receive %#x: the descriptor is forged or "
        "corrupted",
        task_id_, id));
  }
  Pending& pending = it->second;
  if (descriptor.token().size() != pending.token.size() ||
      CRYPTO_memcmp(descriptor.token().data(), pending.token.data(),
                    pending.token.size()) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "the token of receive %#x does not match: the descriptor is forged",
        id));
  }
  auto shape = ShapeFromProto(descriptor.shape());
  if (!shape.ok() || !(*shape == pending.shape) ||
      descriptor.device_id() != pending.device_id) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "receive %#x is for %s on device %d, but the descriptor says %s on "
        "device %d: the descriptor was altered",
        id, pending.shape.ToString(), pending.device_id,
        shape.ok() ? shape->ToString() : "a bad shape",
        descriptor.device_id()));
  }
  const absl::Time now = absl::Now();
  if (now >= pending.expiry) {
    pending.transfer->Fail(absl::DeadlineExceededError(absl::StrFormat(
        "cross-host receive expired at %s before any data arrived",
        FormatUtc(pending.expiry))));
    pending_.erase(it);
    RememberEnded(id, "expired at " + FormatUtc(pending.expiry));
    return absl::FailedPreconditionError(absl::StrFormat(
        "receive %#x expired at %s", id, FormatUtc(pending.expiry)));
  }
  if (pending.transfer->buffer()->IsDeleted()) {
    pending_.erase(it);
    RememberEnded(id, "was cancelled: its buffer was deleted");
    return absl::FailedPreconditionError(absl::StrFormat(
        "receive %#x was cancelled: its buffer was deleted", id));
  }
  Claimed claimed{.receive_id = id,
                  .transfer = std::move(pending.transfer),
                  .expiry = pending.expiry};
  pending_.erase(it);
  RememberEnded(id, "has already been used");
  return claimed;
}

void CrossHostReceives::Complete(Claimed claimed, absl::Status status) {
  if (status.ok()) status = claimed.transfer->Finish();
  if (!status.ok()) claimed.transfer->Fail(status);
}

int CrossHostReceives::Cancel(
    absl::Span<const std::shared_ptr<runtime::Buffer>> buffers) {
  int cancelled = 0;
  pjrt::MutexLock lock(&mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool match = false;
    for (const auto& buffer : buffers) {
      match |= it->second.transfer->buffer() == buffer;
    }
    if (!match) {
      ++it;
      continue;
    }
    it->second.transfer->Fail(absl::CancelledError(
        "the cross-host receive was cancelled before its data arrived"));
    RememberEnded(it->first, "was cancelled");
    pending_.erase(it++);
    ++cancelled;
  }
  return cancelled;
}

int CrossHostReceives::Reap(absl::Time now) {
  int ended = 0;
  pjrt::MutexLock lock(&mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& pending = it->second;
    if (pending.transfer->buffer()->IsDeleted()) {
      // Deleting the buffer cancels the receive; dropping the transfer
      // returns the memory.
      pending.transfer->Fail(absl::CancelledError("receive buffer deleted"));
      RememberEnded(it->first, "was cancelled: its buffer was deleted");
    } else if (now >= pending.expiry) {
      spdlog::info("cross-host receive {:#x} of {} expired without data",
                   it->first, pending.shape.ToString());
      pending.transfer->Fail(absl::DeadlineExceededError(absl::StrFormat(
          "cross-host receive of %s expired at %s before any data arrived "
          "(was the descriptor sent to the task holding the data, and could "
          "it reach this one?)",
          pending.shape.ToString(), FormatUtc(pending.expiry))));
      RememberEnded(it->first, "expired at " + FormatUtc(pending.expiry));
    } else {
      ++it;
      continue;
    }
    pending_.erase(it++);
    ++ended;
  }
  return ended;
}

int CrossHostReceives::pending() const {
  pjrt::MutexLock lock(&mu_);
  return static_cast<int>(pending_.size());
}

absl::StatusOr<int64_t> PushToTask(Cluster& cluster,
                                   bool host_reads_device_memory,
                                   runtime::Buffer& buffer, int task,
                                   const std::string& descriptor,
                                   int64_t chunk_bytes,
                                   const std::function<bool()>& cancelled) {
  const int64_t total = buffer.size_bytes();
  grpc::ClientContext peer;
  cluster.PrepareContext(&peer);
  v1::PushTransferResponse pushed;
  auto stream = cluster.PeerStub(task)->PushTransfer(&peer, &pushed);
  v1::PushTransferRequest message;
  message.mutable_header()->set_transfer_descriptor(descriptor);
  message.mutable_header()->set_sender_task_id(cluster.task_id());
  bool open = stream->Write(message);
  // The reference keeps the buffer from being donated or freed meanwhile.
  std::unique_ptr<runtime::Buffer::ExternalReference> reference;
  if (host_reads_device_memory) {
    auto acquired = buffer.AcquireExternalReference();
    if (!acquired.ok()) {
      peer.TryCancel();
      stream->Finish().ok();
      return acquired.status();
    }
    reference = *std::move(acquired);
  }
  int64_t sent = 0;
  absl::Status local;
  while (open && sent < total) {
    if (cancelled()) {
      local = absl::CancelledError("the call was cancelled");
      break;
    }
    int64_t size = std::min(chunk_bytes, total - sent);
    std::string* chunk = message.mutable_chunk();
    if (reference != nullptr) {
      chunk->assign(static_cast<const char*>(reference->data()) + sent,
                    static_cast<size_t>(size));
    } else {
      chunk->resize(static_cast<size_t>(size));
      local = buffer.CopyRawToHost(chunk->data(), sent, size);
      if (!local.ok()) break;
    }
    open = stream->Write(message);
    if (open) sent += size;
  }
  if (!local.ok()) {
    peer.TryCancel();
    stream->Finish().ok();
    return absl::Status(
        local.code(),
        absl::StrFormat("copy to task %d stopped after %d of %d bytes: %s",
                        task, sent, total, local.message()));
  }
  if (open) stream->WritesDone();
  grpc::Status status = stream->Finish();
  if (!status.ok()) {
    return absl::Status(
        static_cast<absl::StatusCode>(status.error_code()),
        absl::StrFormat("copy to task %d (%s) failed after %d of %d bytes: %s",
                        task, cluster.address(task), sent, total,
                        status.error_message()));
  }
  return total;
}

}  // namespace pjrt::daemon
