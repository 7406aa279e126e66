#include "daemon/task_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/cancellation.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "daemon/cluster.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "grpcpp/client_context.h"

namespace pjrt::daemon {

// --- the directory (task 0) -------------------------------------------------

void ExchangeDirectory::ExpireLocked() {
  const absl::Time now = absl::Now();
  if (now - last_expiry_ < absl::Seconds(1)) return;
  last_expiry_ = now;
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now - it->second.set > kDirectoryEntryLifetime ? entries_.erase(it)
                                                        : std::next(it);
  }
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    it = now - it->second.touched > kDirectoryEntryLifetime
             ? barriers_.erase(it)
             : std::next(it);
  }
}

absl::Status ExchangeDirectory::Set(const std::string& key,
                                    const std::string& value) {
  if (key.empty() || key.size() > kMaxDirectoryKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a directory key has 1 to %d bytes, not %d",
                        kMaxDirectoryKeyBytes, key.size()));
  }
  if (value.size() > kMaxDirectoryValueBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the value of directory key %s has %d bytes; at most %d", key,
        value.size(), kMaxDirectoryValueBytes));
  }
  MutexLock lock(&mu_);
  ExpireLocked();
  if (entries_.size() >= kMaxDirectoryEntries && !entries_.contains(key)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the exchange directory holds %d entries, its limit", entries_.size()));
  }
  entries_[key] = Entry{value, absl::Now()};
  return absl::OkStatus();
}

v1::StoreGetResponse ExchangeDirectory::Get(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  MutexLock lock(&mu_);
  ExpireLocked();
  const auto all_set = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const std::string& key : keys) {
      if (!entries_.contains(key)) return false;
    }
    return true;
  };
  mu_.AwaitWithTimeout(all_set, std::min(timeout, kDirectoryMaxWait));
  v1::StoreGetResponse response;
  for (const std::string& key : keys) {
    if (!entries_.contains(key)) response.add_missing(key);
  }
  if (response.missing_size() == 0) {
    for (const std::string& key : keys)
      response.add_values(entries_[key].value);
  }
  return response;
}

absl::StatusOr<v1::MeetResponse> ExchangeDirectory::Meet(
    const v1::MeetRequest& request) {
  const std::vector<int> tasks(request.tasks().begin(), request.tasks().end());
  const int task = request.task_id();
  if (request.id().empty() || request.id().size() > kMaxDirectoryKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a barrier id has 1 to %d bytes, not %d",
                        kMaxDirectoryKeyBytes, request.id().size()));
  }
  if (!std::is_sorted(tasks.begin(), tasks.end()) ||
      std::adjacent_find(tasks.begin(), tasks.end()) != tasks.end() ||
      !std::binary_search(tasks.begin(), tasks.end(), task)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "barrier %s: the tasks [%s] must be ascending, each once, and include "
        "the caller (task %d)",
        request.id(), absl::StrJoin(tasks, ", "), task));
  }
  const absl::Time deadline =
      absl::Now() +
      std::min(absl::Milliseconds(request.timeout_ms()), kDirectoryMaxWait);
  MutexLock lock(&mu_);
  ExpireLocked();
  const std::string& id = request.id();
  // A task that was told of a completed barrier and meets at the same id
  // again starts the next round: it waits until every task was told.
  const auto told_before = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto it = barriers_.find(id);
    return it != barriers_.end() && it->second.told.contains(task);
  };
  if (told_before() &&
      !mu_.AwaitWithTimeout(
          [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !told_before(); },
          deadline - absl::Now())) {
    v1::MeetResponse response;
    for (int t : barriers_[id].tasks) {
      if (!barriers_[id].told.contains(t)) response.add_missing(t);
    }
    return response;
  }
  auto it = barriers_.find(id);
  if (it == barriers_.end()) {
    if (barriers_.size() >= kMaxDirectoryEntries) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("the exchange directory holds %d barriers, its limit",
                          barriers_.size()));
    }
    it = barriers_.emplace(id, Barrier{.tasks = tasks}).first;
  } else if (it->second.tasks != tasks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "barrier %s: task %d meets tasks [%s], but the others meet [%s]", id,
        task, absl::StrJoin(tasks, ", "),
        absl::StrJoin(it->second.tasks, ", ")));
  }
  it->second.values[task] = request.value();
  it->second.touched = absl::Now();
  const auto complete = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto b = barriers_.find(id);
    return b != barriers_.end() &&
           b->second.values.size() == b->second.tasks.size();
  };
  mu_.AwaitWithTimeout(complete, deadline - absl::Now());
  v1::MeetResponse response;
  Barrier& barrier = barriers_[id];
  if (!complete()) {
    for (int t : barrier.tasks) {
      if (!barrier.values.contains(t)) response.add_missing(t);
    }
    return response;
  }
  for (int t : barrier.tasks) response.add_values(barrier.values[t]);
  barrier.told.insert(task);
  if (barrier.told.size() == barrier.tasks.size()) barriers_.erase(id);
  return response;
}

// --- the transport
// ------------------------------------------------------------

namespace {

// 32 bits of FNV-1a: the tag that keeps concurrent exchanges on one set of
// connections apart.
uint32_t Tag(absl::string_view id) {
  uint32_t h = 2166136261u;
  for (unsigned char c : id) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

std::chrono::milliseconds Millis(absl::Duration d) {
  return std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

// The host of "host:port" or "[v6]:port".
std::string HostOf(const std::string& address) {
  if (!address.empty() && address[0] == '[') {
    const size_t end = address.find(']');
    return address.substr(1, end == std::string::npos ? end : end - 1);
  }
  return address.substr(0, address.rfind(':'));
}

// Gloo's rendezvous store on the directory. Gloo expects errors as
// exceptions.
class DirectoryStore final : public gloo::rendezvous::Store {
 public:
  DirectoryStore(GlooTransport* transport, absl::Time deadline,
                 const Cancellation* cancellation)
      : transport_(transport),
        deadline_(deadline),
        cancellation_(cancellation) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(transport_->StoreSet(key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    const v1::StoreGetResponse response = WaitFor({key});
    return std::vector<char>(response.values(0).begin(),
                             response.values(0).end());
  }
  void wait(const std::vector<std::string>& keys) override { WaitFor(keys); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds&) override {
    WaitFor(keys);
  }

 private:
  static void Check(const absl::Status& status) {
    if (!status.ok()) throw std::runtime_error(std::string(status.message()));
  }
  v1::StoreGetResponse WaitFor(const std::vector<std::string>& keys) {
    while (true) {
      Check(CheckCancelled(cancellation_));
      const absl::Duration left = deadline_ - absl::Now();
      if (left <= absl::ZeroDuration()) {
        throw std::runtime_error(absl::StrFormat(
            "the tasks' connection addresses (%s) did not all appear in time",
            absl::StrJoin(keys, ", ")));
      }
      auto response = transport_->StoreGet(keys, left);
      Check(response.status());
      if (response->missing_size() == 0) return *std::move(response);
    }
  }

  GlooTransport* const transport_;
  const absl::Time deadline_;
  const Cancellation* const cancellation_;
};

// This task's rank among `tasks` (ascending, this task among them).
int RankOf(const std::vector<int>& tasks, int task) {
  return static_cast<int>(std::lower_bound(tasks.begin(), tasks.end(), task) -
                          tasks.begin());
}

// Gloo's typed buffers only use the element type's size.
struct Bytes16 {
  uint64_t lo, hi;
};

template <typename Fn>
void WithElementType(int element_bytes, Fn fn) {
  switch (element_bytes) {
    case 1:
      fn(uint8_t{});
      break;
    case 2:
      fn(uint16_t{});
      break;
    case 4:
      fn(uint32_t{});
      break;
    case 8:
      fn(uint64_t{});
      break;
    default:
      fn(Bytes16{});
      break;
  }
}

}  // namespace

GlooTransport::GlooTransport(Cluster* cluster, ExchangeDirectory* directory)
    : cluster_(cluster), directory_(directory) {}

GlooTransport::~GlooTransport() {
  MutexLock lock(&mu_);
  connections_.clear();
  device_.reset();
}

namespace {

// Calls task 0's directory over the peer channel: `call(stub, context,
// response)`, answered within `wait` and 10 s for the network; UNAVAILABLE
// saying `what` failed otherwise.
template <typename Response, typename Call>
absl::StatusOr<Response> CallTaskZero(Cluster* cluster, absl::Duration wait,
                                      absl::string_view what, Call call) {
  grpc::ClientContext context;
  cluster->PrepareContext(&context);
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + wait + absl::Seconds(10)));
  Response response;
  grpc::Status status = call(cluster->PeerStub(0), &context, &response);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("task 0 (the cluster's exchange directory) %s: %s",
                        what, status.error_message()));
  }
  return response;
}

}  // namespace

absl::Status GlooTransport::StoreSet(const std::string& key,
                                     const std::string& value) {
  if (directory_ != nullptr) return directory_->Set(key, value);
  v1::StoreSetRequest request;
  request.set_key(key);
  request.set_value(value);
  return CallTaskZero<v1::StoreSetResponse>(
             cluster_, absl::ZeroDuration(), "did not take a key",
             [&](v1::Peer::Stub* stub, grpc::ClientContext* context,
                 v1::StoreSetResponse* response) {
               return stub->StoreSet(context, request, response);
             })
      .status();
}

absl::StatusOr<v1::StoreGetResponse> GlooTransport::StoreGet(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  timeout = std::min(timeout, kDirectoryMaxWait);
  if (directory_ != nullptr) return directory_->Get(keys, timeout);
  v1::StoreGetRequest request;
  for (const std::string& key : keys) request.add_keys(key);
  request.set_timeout_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(timeout)));
  return CallTaskZero<v1::StoreGetResponse>(
      cluster_, timeout, "did not answer",
      [&](v1::Peer::Stub* stub, grpc::ClientContext* context,
          v1::StoreGetResponse* response) {
        return stub->StoreGet(context, request, response);
      });
}

absl::StatusOr<v1::MeetResponse> GlooTransport::Meet(
    const v1::MeetRequest& request) {
  if (directory_ != nullptr) return directory_->Meet(request);
  return CallTaskZero<v1::MeetResponse>(
      cluster_, absl::Milliseconds(request.timeout_ms()), "did not answer",
      [&](v1::Peer::Stub* stub, grpc::ClientContext* context,
          v1::MeetResponse* response) {
        return stub->Meet(context, request, response);
      });
}

absl::StatusOr<std::shared_ptr<gloo::transport::Device>>
GlooTransport::Device() {
  MutexLock lock(&mu_);
  if (device_ != nullptr) return device_;
  gloo::transport::tcp::attr attr;
  attr.hostname = HostOf(cluster_->address(cluster_->task_id()));
  try {
    device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot open Gloo's TCP transport on %s: %s", attr.hostname, e.what()));
  }
  return device_;
}

absl::StatusOr<std::shared_ptr<gloo::Context>> GlooTransport::Prepare(
    const Exchange& exchange, std::shared_ptr<Connections>* connections) {
  const absl::Time deadline = absl::Now() + exchange.timeout;
  std::vector<std::string> incarnations;
  for (int t : exchange.tasks) {
    incarnations.push_back(absl::StrFormat("%x", cluster_->incarnation_of(t)));
  }
  const std::string set = absl::StrCat(absl::StrJoin(exchange.tasks, ","), "@");
  const std::string key = absl::StrCat(set, absl::StrJoin(incarnations, ","));
  {
    MutexLock lock(&mu_);
    auto [it, added] = connections_.try_emplace(key);
    if (added) {
      it->second = std::make_shared<Connections>();
      // The same tasks' connections from before one of them restarted are
      // dead: let them go (an exchange still using them holds its own
      // reference).
      for (auto old = connections_.lower_bound(set);
           old != connections_.end() && absl::StartsWith(old->first, set);) {
        if (old->first != key) {
          old = connections_.erase(old);
        } else {
          ++old;
        }
      }
    }
    *connections = it->second;
  }
  Connections& c = **connections;
  int64_t known;
  {
    MutexLock lock(&c.mu);
    known = c.generation;
  }

  // Meet every task of the exchange, learning their generations.
  v1::MeetRequest request;
  request.set_id(exchange.id);
  request.set_task_id(cluster_->task_id());
  for (int t : exchange.tasks) request.add_tasks(t);
  request.set_value(known);
  v1::MeetResponse met;
  while (true) {
    PJRT_RETURN_IF_ERROR(CheckCancelled(exchange.cancellation));
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      std::vector<std::string> missing;
      for (int t : met.missing()) missing.push_back(absl::StrCat("task ", t));
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: %s did not arrive within %s (was every task's part of the "
          "launch started, with the same launch_id? is the task up?)",
          exchange.name,
          missing.empty() ? "a task" : absl::StrJoin(missing, ", "),
          absl::FormatDuration(exchange.timeout)));
    }
    request.set_timeout_ms(static_cast<uint32_t>(
        absl::ToInt64Milliseconds(std::min(left, kDirectoryMaxWait))));
    PJRT_ASSIGN_OR_RETURN(met, Meet(request));
    if (met.missing_size() == 0) break;
  }
  const int64_t generation =
      *std::max_element(met.values().begin(), met.values().end());
  // Serializes the making of this set's connections (not their use).
  MutexLock lock(&c.mu);
  if (c.context != nullptr && c.generation == generation) return c.context;
  if (c.generation > generation) {
    // Another exchange dropped the connections since this one met.
    return absl::UnavailableError(absl::StrFormat(
        "%s: the connections between tasks [%s] failed meanwhile; run the "
        "launch again",
        exchange.name, absl::StrJoin(exchange.tasks, ", ")));
  }

  // Connect anew, at the highest generation any task reported.
  c.context.reset();
  c.generation = generation;
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<gloo::transport::Device> device,
                        Device());
  const int rank = RankOf(exchange.tasks, cluster_->task_id());
  try {
    auto context = std::make_shared<gloo::rendezvous::Context>(
        rank, static_cast<int>(exchange.tasks.size()));
    context->setTimeout(Millis(exchange.timeout));
    DirectoryStore store(this, deadline, exchange.cancellation);
    gloo::rendezvous::PrefixStore prefixed(
        absl::StrCat("gloo/", key, "/", generation), store);
    context->connectFullMesh(prefixed, device);
    c.context = std::move(context);
  } catch (const std::exception& e) {
    c.generation++;
    return absl::UnavailableError(
        absl::StrFormat("%s: cannot connect tasks [%s]: %s", exchange.name,
                        absl::StrJoin(exchange.tasks, ", "), e.what()));
  }
  spdlog::info("connected tasks [{}] for collectives (generation {})",
               absl::StrJoin(exchange.tasks, ", "), generation);
  return c.context;
}

absl::Status GlooTransport::Failed(const Exchange& exchange,
                                   Connections* connections,
                                   absl::string_view what) {
  {
    MutexLock lock(&connections->mu);
    connections->context.reset();
    connections->generation++;
  }
  // Which of the exchange's tasks went away?
  std::vector<std::string> gone;
  const v1::ClusterStatus status = cluster_->Status(absl::Seconds(1));
  for (const v1::TaskStatus& task : status.tasks()) {
    if (!std::binary_search(exchange.tasks.begin(), exchange.tasks.end(),
                            task.task_id())) {
      continue;
    }
    if (!task.reachable()) {
      gone.push_back(absl::StrFormat("task %d is down", task.task_id()));
    } else if (!task.error().empty()) {
      gone.push_back(absl::StrFormat("task %d restarted", task.task_id()));
    }
  }
  return absl::UnavailableError(absl::StrFormat(
      "%s: the exchange between tasks [%s] failed%s: %s", exchange.name,
      absl::StrJoin(exchange.tasks, ", "),
      gone.empty() ? "" : absl::StrCat(" (", absl::StrJoin(gone, "; "), ")"),
      what));
}

absl::Status GlooTransport::AllReduce(const Exchange& exchange, void* data,
                                      int64_t elements, int element_bytes,
                                      const Reducer& reduce) {
  if (elements == 0) return absl::OkStatus();
  std::shared_ptr<Connections> connections;
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<gloo::Context> context,
                        Prepare(exchange, &connections));
  try {
    gloo::AllreduceOptions options(context);
    WithElementType(element_bytes, [&](auto type) {
      using T = decltype(type);
      options.setOutput<T>(static_cast<T*>(data),
                           static_cast<size_t>(elements));
    });
    const size_t bytes = static_cast<size_t>(element_bytes);
    options.setReduceFunction(
        [&reduce, bytes](void* out, const void* a, const void* b, size_t n) {
          if (out == a) {
            reduce(out, b, static_cast<int64_t>(n));
          } else if (out == b) {
            reduce(out, a, static_cast<int64_t>(n));
          } else {
            std::memcpy(out, a, n * bytes);
            reduce(out, b, static_cast<int64_t>(n));
          }
        });
    options.setTag(Tag(exchange.id));
    options.setTimeout(Millis(exchange.timeout));
    gloo::allreduce(options);
  } catch (const std::exception& e) {
    return Failed(exchange, connections.get(), e.what());
  }
  return absl::OkStatus();
}

absl::Status GlooTransport::AllGather(const Exchange& exchange,
                                      const void* mine,
                                      absl::Span<const int64_t> bytes,
                                      void* out) {
  int64_t total = 0;
  for (int64_t b : bytes) total += b;
  if (total == 0) return absl::OkStatus();
  std::shared_ptr<Connections> connections;
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<gloo::Context> context,
                        Prepare(exchange, &connections));
  const int rank = RankOf(exchange.tasks, cluster_->task_id());
  try {
    gloo::AllgathervOptions options(context);
    options.setInput<uint8_t>(
        const_cast<uint8_t*>(static_cast<const uint8_t*>(mine)),
        static_cast<size_t>(bytes[rank]));
    options.setOutput<uint8_t>(static_cast<uint8_t*>(out),
                               std::vector<size_t>(bytes.begin(), bytes.end()));
    options.setTag(Tag(exchange.id));
    options.setTimeout(Millis(exchange.timeout));
    gloo::allgatherv(options);
  } catch (const std::exception& e) {
    return Failed(exchange, connections.get(), e.what());
  }
  return absl::OkStatus();
}

absl::Status GlooTransport::AllToAll(const Exchange& exchange, const void* send,
                                     absl::Span<const int64_t> send_bytes,
                                     void* receive,
                                     absl::Span<const int64_t> receive_bytes) {
  std::shared_ptr<Connections> connections;
  // Every task takes part even when it moves nothing itself: the others
  // may.
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<gloo::Context> context,
                        Prepare(exchange, &connections));
  try {
    gloo::AlltoallvOptions options(context);
    // Gloo wants a buffer even for no bytes.
    char none = 0;
    options.setInput<uint8_t>(
        const_cast<uint8_t*>(send != nullptr
                                 ? static_cast<const uint8_t*>(send)
                                 : reinterpret_cast<uint8_t*>(&none)),
        std::vector<int64_t>(send_bytes.begin(), send_bytes.end()));
    options.setOutput<uint8_t>(
        receive != nullptr ? static_cast<uint8_t*>(receive)
                           : reinterpret_cast<uint8_t*>(&none),
        std::vector<int64_t>(receive_bytes.begin(), receive_bytes.end()));
    options.setTag(Tag(exchange.id));
    options.setTimeout(Millis(exchange.timeout));
    gloo::alltoallv(options);
  } catch (const std::exception& e) {
    return Failed(exchange, connections.get(), e.what());
  }
  return absl::OkStatus();
}

}  // namespace pjrt::daemon
