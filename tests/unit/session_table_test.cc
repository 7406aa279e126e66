#include "daemon/session_table.h"

#include <vector>

#include "base/cancellation.h"
#include "gtest/gtest.h"
#include "runtime/buffer.h"
#include "runtime/client.h"

namespace pjrt::daemon {
namespace {

class FakeClock {
 public:
  absl::Time Now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1000000);
};

class RecordingAttachment : public SessionAttachment {
 public:
  void Detach(const absl::Status& why) override {
    detached++;
    last = why;
  }
  int detached = 0;
  absl::Status last;
};

class SessionTableTest : public ::testing::Test {
 protected:
  SessionTableTest()
      : table_(SessionTableOptions{.default_lease = absl::Seconds(10),
                                   .max_lease = absl::Seconds(100)},
               [this] { return clock_.Now(); }) {
    runtime::ClientOptions options;
    options.platform = "host";
    options.memory_limit_bytes = 1 << 20;
    client_ = *runtime::Client::Create(options);
  }

  std::shared_ptr<runtime::Buffer> MakeBuffer(int64_t elements) {
    std::vector<float> data(elements);
    return *client_->BufferFromHostBuffer(
        data.data(), hlo::Shape(hlo::PrimitiveType::kF32, {elements}),
        client_->devices()[0]);
  }

  int64_t BytesInUse() {
    return client_->devices()[0]->allocator()->GetStats().bytes_in_use;
  }

  // Destroyed in reverse: the table (and its buffers) before the client.
  FakeClock clock_;
  std::unique_ptr<runtime::Client> client_;
  SessionTable table_;
};

TEST_F(SessionTableTest, LookupFindsOpenSessionsOnly) {
  auto session = *table_.Open("a", "peer", absl::ZeroDuration());
  EXPECT_EQ(*table_.Lookup(session->id(), Caller{}), session);
  EXPECT_EQ(table_.Lookup(session->id() + 1, Caller{}).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(table_.Close(session->id(), absl::OkStatus()).ok());
  EXPECT_EQ(table_.Lookup(session->id(), Caller{}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SessionTableTest, LeaseIsDefaultedAndClamped) {
  EXPECT_EQ((*table_.Open("a", "", absl::ZeroDuration()))->lease(),
            absl::Seconds(10));
  EXPECT_EQ((*table_.Open("b", "", absl::Hours(5)))->lease(),
            absl::Seconds(100));
}

TEST_F(SessionTableTest, HandlesOfAnotherSessionAreNotFound) {
  auto a = *table_.Open("a", "", absl::ZeroDuration());
  auto b = *table_.Open("b", "", absl::ZeroDuration());
  uint64_t handle = *a->AddBuffer(MakeBuffer(4));
  EXPECT_TRUE(a->LookupBuffer(handle).ok());
  absl::Status foreign = b->LookupBuffer(handle).status();
  absl::Status unknown = b->LookupBuffer(handle ^ 1).status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
}

TEST_F(SessionTableTest, CloseFreesEveryBufferOfTheSession) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  session->AddBuffer(MakeBuffer(100)).IgnoreError();
  session->AddBuffer(MakeBuffer(28)).IgnoreError();
  EXPECT_EQ(BytesInUse(), 512);
  auto stats = *table_.Close(session->id(), absl::OkStatus());
  EXPECT_EQ(stats.buffers_freed, 2);
  EXPECT_EQ(stats.bytes_freed, 512);
  EXPECT_EQ(BytesInUse(), 0);
  // A buffer created while the session closed is refused.
  EXPECT_EQ(session->AddBuffer(MakeBuffer(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionTableTest, DeleteBuffersIsAllOrNothing) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  uint64_t h1 = *session->AddBuffer(MakeBuffer(4));
  uint64_t h2 = *session->AddBuffer(MakeBuffer(4));
  std::vector<uint64_t> with_unknown = {h1, 12345};
  EXPECT_EQ(session->DeleteBuffers(with_unknown).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(session->buffer_count(), 2);
  std::vector<uint64_t> both = {h1, h2};
  EXPECT_TRUE(session->DeleteBuffers(both).ok());
  EXPECT_EQ(session->buffer_count(), 0);
  EXPECT_EQ(BytesInUse(), 0);
}

TEST_F(SessionTableTest, ReleasePassesOverHandlesAlreadyGone) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  uint64_t kept = *session->AddBuffer(MakeBuffer(4));
  const int64_t kept_bytes = BytesInUse();
  uint64_t h1 = *session->AddBuffer(MakeBuffer(100));
  uint64_t h2 = *session->AddBuffer(MakeBuffer(28));
  std::vector<uint64_t> buffers = {h1, 12345, h2, h1};
  std::vector<uint64_t> executables = {777};
  EXPECT_EQ(session->Release(buffers, executables), 2);
  EXPECT_EQ(session->buffer_count(), 1);
  EXPECT_TRUE(session->LookupBuffer(kept).ok());
  EXPECT_EQ(BytesInUse(), kept_bytes);
  EXPECT_EQ(session->Release({}, {}), 0);
}

TEST_F(SessionTableTest, ExpiredLeasesAreReaped) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  session->AddBuffer(MakeBuffer(4)).IgnoreError();
  clock_.Advance(absl::Seconds(9));
  EXPECT_EQ(table_.ReapExpired(), 0);
  // A lookup renews the lease.
  ASSERT_TRUE(table_.Lookup(session->id(), Caller{}).ok());
  clock_.Advance(absl::Seconds(9));
  EXPECT_EQ(table_.ReapExpired(), 0);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(table_.ReapExpired(), 1);
  EXPECT_EQ(table_.size(), 0);
  EXPECT_EQ(BytesInUse(), 0);
}

TEST_F(SessionTableTest, AttachedSessionsDoNotExpire) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  RecordingAttachment attachment;
  ASSERT_TRUE(session->Attach(&attachment).ok());
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(table_.ReapExpired(), 0);
  // Once the attachment goes away by itself, the lease runs again.
  EXPECT_TRUE(session->ForgetAttachment(&attachment));
  EXPECT_EQ(table_.ReapExpired(), 1);
  EXPECT_EQ(attachment.detached, 0);
}

TEST_F(SessionTableTest, SecondAttachmentIsRefused) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  RecordingAttachment first, second;
  ASSERT_TRUE(session->Attach(&first).ok());
  EXPECT_EQ(session->Attach(&second).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(session->ForgetAttachment(&first));
}

TEST_F(SessionTableTest, CloseDetachesTheAttachmentOnce) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  RecordingAttachment attachment;
  ASSERT_TRUE(session->Attach(&attachment).ok());
  ASSERT_TRUE(table_.Close(session->id(), absl::OkStatus()).ok());
  session->Close(absl::OkStatus());
  EXPECT_EQ(attachment.detached, 1);
  EXPECT_FALSE(session->ForgetAttachment(&attachment));
}

TEST_F(SessionTableTest, ShutdownClosesEverythingAndRefusesNewSessions) {
  auto session = *table_.Open("a", "", absl::ZeroDuration());
  RecordingAttachment attachment;
  ASSERT_TRUE(session->Attach(&attachment).ok());
  session->AddBuffer(MakeBuffer(8)).IgnoreError();
  table_.Shutdown(absl::UnavailableError("bye"));
  EXPECT_EQ(attachment.last.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(BytesInUse(), 0);
  EXPECT_EQ(table_.Open("b", "", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(SessionTableTest, ListShowsSessionsWithoutTheirSecretIds) {
  auto a = *table_.Open("alpha", "unix:", absl::ZeroDuration());
  a->AddBuffer(MakeBuffer(4)).IgnoreError();
  auto list = table_.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].client_name, "alpha");
  EXPECT_EQ(list[0].public_id, a->public_id());
  EXPECT_NE(list[0].public_id, a->id());
  EXPECT_EQ(list[0].bytes, 16);
}

TEST_F(SessionTableTest, ClientNamesAreBoundedAndEscapedInMessages) {
  auto session = table_.Open(std::string(kMaxClientNameBytes + 1, 'x'), "p",
                             absl::ZeroDuration());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(session.status().message().find("257 bytes"),
            absl::string_view::npos)
      << session.status();
  // A newline in a name cannot forge a log line.
  session = table_.Open("evil\n[info] forged", "p", absl::ZeroDuration());
  ASSERT_TRUE(session.ok());
  EXPECT_EQ((*session)->DebugString().find('\n'), std::string::npos);
  EXPECT_NE((*session)->DebugString().find("evil\\n[info] forged"),
            std::string::npos)
      << (*session)->DebugString();
}

TEST(SessionTableLimits, SessionsBeyondTheLimitAreRefused) {
  SessionTable table(SessionTableOptions{.max_sessions = 2});
  auto a = table.Open("a", "p", absl::ZeroDuration());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(table.Open("b", "p", absl::ZeroDuration()).ok());
  auto c = table.Open("c", "p", absl::ZeroDuration());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("max_sessions"), absl::string_view::npos);
  ASSERT_TRUE(table.Close((*a)->id(), absl::OkStatus()).ok());
  EXPECT_TRUE(table.Open("c", "p", absl::ZeroDuration()).ok());
}

TEST(SessionTableLimits, SessionsAreCancelledWithTheirParentAndWhenClosed) {
  auto daemon = std::make_shared<Cancellation>();
  SessionTable table(SessionTableOptions{.cancellation = daemon});
  auto a = table.Open("a", "p", absl::ZeroDuration());
  auto b = table.Open("b", "p", absl::ZeroDuration());
  ASSERT_TRUE(a.ok() && b.ok());
  std::shared_ptr<Cancellation> a_cancel = (*a)->cancellation();
  ASSERT_TRUE(table.Close((*a)->id(), absl::OkStatus()).ok());
  EXPECT_EQ(a_cancel->Check().code(), absl::StatusCode::kCancelled);
  EXPECT_NE(a_cancel->Check().message().find("was closed"),
            absl::string_view::npos);
  EXPECT_FALSE((*b)->cancellation()->IsCancelled());
  daemon->Cancel(absl::UnavailableError("shutting down"));
  EXPECT_EQ((*b)->cancellation()->Check().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(SessionTableTest, HandlesBeyondTheSessionLimitAreRefused) {
  Session session(1, 1, "s", "p", absl::Seconds(10), absl::Now(),
                  SessionLimits{.max_handles = 3});
  ASSERT_TRUE(session.AddBuffer(MakeBuffer(1)).ok());
  auto a = MakeBuffer(1), b = MakeBuffer(1);
  // A tuple of two new arrays needs five: three handles, plus one per
  // element.
  auto tuple =
      runtime::Buffer::MakeTuple(client_.get(), client_->devices()[0], {a, b});
  auto refused = session.AddBuffer(tuple);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_handles_per_session"),
            absl::string_view::npos)
      << refused.status();
  EXPECT_EQ(session.buffer_count(), 1);
  EXPECT_EQ(session.CheckNewHandles({5, 6}).code(), absl::StatusCode::kOk);
  EXPECT_EQ(session.AddBuffersWithHandles({5, 6}, {a, b}).code(),
            absl::StatusCode::kOk);
  EXPECT_EQ(session.AddBuffer(MakeBuffer(1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  tuple->Delete();
}

TEST_F(SessionTableTest, WaitingCallsBeyondTheSessionLimitAreRefused) {
  Session session(1, 1, "s", "p", absl::Seconds(10), absl::Now(),
                  SessionLimits{.max_waiting_calls = 2});
  {
    auto first = session.StartWaitingCall();
    auto second = session.StartWaitingCall();
    ASSERT_TRUE(first.ok() && second.ok());
    auto third = session.StartWaitingCall();
    EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(third.status().message().find("max_waiting_calls_per_session"),
              absl::string_view::npos);
  }
  // Slots come back when the calls end.
  EXPECT_TRUE(session.StartWaitingCall().ok());
}

TEST_F(SessionTableTest, RemoteBuffersShareTheHandleSpaceAndTheLimit) {
  Session session(1, 1, "s", "p", absl::Seconds(10), absl::Now(),
                  SessionLimits{.max_handles = 3});
  session.SetWholeCluster();
  uint64_t local = *session.AddBuffer(MakeBuffer(1));
  ASSERT_TRUE(session.AddRemoteBuffers(2, {0x77, 0x78}).ok());
  EXPECT_EQ(session.RemoteBufferTask(0x77), 2);
  EXPECT_EQ(session.RemoteBufferTask(local), -1);
  // Remote buffers count against the session's handles.
  EXPECT_EQ(session.AddRemoteBuffers(1, {0x79}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(session.CheckNewHandles({0x77}).code(),
            absl::StatusCode::kInvalidArgument);
  // A remote buffer is named as such where a local one is needed.
  absl::Status there = session.LookupBuffer(0x78).status();
  EXPECT_EQ(there.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(there.message().find("0x78 lives on a device of task 2"),
            absl::string_view::npos)
      << there;
  // Released ones wait for the proxy to delete them there.
  std::vector<uint64_t> released = {0x77, 0x99};
  EXPECT_EQ(session.Release(released, {}), 1);
  Session::RemoteReleases pending = session.TakeRemoteReleases();
  ASSERT_EQ(pending.buffers.size(), 1u);
  EXPECT_EQ(pending.buffers[2], std::vector<uint64_t>{0x77});
  EXPECT_TRUE(session.TakeRemoteReleases().empty());
  EXPECT_EQ(session.RemoteBufferTask(0x77), -1);
}

TEST_F(SessionTableTest, AProxyForgottenTakesWhatItHeld) {
  Session session(1, 1, "s", "p", absl::Seconds(10), absl::Now());
  session.SetWholeCluster();
  EXPECT_EQ(session.SetProxy(1, {0xa1, 7})->id, 0xa1u);
  // The first proxy recorded stays in force.
  EXPECT_EQ(session.SetProxy(1, {0xb1, 8})->id, 0xa1u);
  EXPECT_EQ(session.SetProxy(1, {0xb1, 8})->incarnation, 7u);
  EXPECT_EQ(session.SetProxy(2, {0xa2, 7})->id, 0xa2u);
  ASSERT_TRUE(session.AddRemoteBuffers(1, {0x10}).ok());
  ASSERT_TRUE(session.AddRemoteBuffers(2, {0x20}).ok());
  // Another task's handle that this session uses already cannot name both.
  EXPECT_EQ(session.AddRemoteBuffers(2, {0x10}).code(),
            absl::StatusCode::kInternal);
  uint64_t program = *session.AddExecutable(nullptr);
  session.SetRemoteParts(program, {{1, 0x31}, {2, 0x32}});
  // Another proxy's id: nothing happens.
  EXPECT_FALSE(session.ForgetProxy(1, 0xb1));
  EXPECT_TRUE(session.ForgetProxy(1, 0xa1));
  EXPECT_FALSE(session.ProxyOn(1).has_value());
  EXPECT_EQ(session.RemoteBufferTask(0x10), -1);
  EXPECT_EQ(session.RemoteBufferTask(0x20), 2);
  auto parts = session.RemoteParts(program);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(*parts, (absl::flat_hash_map<int, uint64_t>{{2, 0x32}}));
  // Deleting the executable queues its remaining part for deletion.
  ASSERT_TRUE(session.DeleteExecutable(program).ok());
  EXPECT_FALSE(session.RemoteParts(program).has_value());
  Session::RemoteReleases pending = session.TakeRemoteReleases();
  EXPECT_EQ(pending.executables[2], std::vector<uint64_t>{0x32});
  // Those that could not be sent come back for the next try; not those of
  // a task without a proxy.
  session.RequeueRemoteReleases(2, {0x20}, {0x32});
  session.RequeueRemoteReleases(1, {0x10}, {});
  pending = session.TakeRemoteReleases();
  EXPECT_EQ(pending.buffers.size(), 1u);
  EXPECT_EQ(pending.buffers[2], std::vector<uint64_t>{0x20});
  EXPECT_EQ(pending.executables[2], std::vector<uint64_t>{0x32});
  // A closed session keeps its proxies (for their closing) but no more
  // remote buffers, and takes no new proxy.
  session.Close(absl::OkStatus());
  EXPECT_EQ(session.ProxyOn(2)->id, 0xa2u);
  EXPECT_EQ(session.RemoteBufferTask(0x20), -1);
  EXPECT_EQ(session.SetProxy(3, {0xa3, 7}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pjrt::daemon
