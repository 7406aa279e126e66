// Programs written to break the daemon: shapes whose sizes overflow, chains
// deep enough to overflow a recursive compiler, call graphs that explode
// when inlined, bad replica counts and groups, runs that never end and
// peers that never come. Each must be refused at once with the right
// status, or stop when cancelled. In process, no daemon.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/cancellation.h"
#include "compiler/collectives.h"
#include "compiler/host/compiler.h"
#include "compiler/host/host_program.h"
#include "gtest/gtest.h"
#include "hlo/parser.h"
#include "hlo/verifier.h"
#include "runtime/buffer_sequencing_event.h"
#include "runtime/executable.h"
#include "tests/unit/hlo_test_programs.h"
#include "tests/unit/runtime_test_util.h"

namespace pjrt::runtime {
namespace {

using ::pjrt::runtime::testing::MakeClient;
using ::pjrt::runtime::testing::Put;
using ::pjrt::runtime::testing::Read;

bool Contains(const absl::Status& status, absl::string_view text) {
  return status.message().find(text) != absl::string_view::npos;
}

class HostileProgramTest : public ::testing::Test {
 protected:
  std::unique_ptr<Client> client_ =
      MakeClient(device::AllocationModel::kSynchronous, 2, 64 << 20, 4);

  absl::Status CompileStatus(const std::string& text,
                             CompileOptions options = {}) {
    return Executable::Compile(client_.get(), text, options).status();
  }
};

// --- sizes that overflow ----------------------------------------------------

TEST_F(HostileProgramTest, ShapesWhoseSizeWrapsAroundAreRefusedAtParse) {
  // 1024 x (2^54 + 1) f32 elements: 2^66 + 4096 bytes, 4096 modulo 2^64.
  absl::Status status = CompileStatus(R"(
HloModule wrap
ENTRY e {
  c = f32[] constant(1)
  ROOT b = f32[1024,18014398509481985] broadcast(c), dimensions={}
})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "too large")) << status;
  EXPECT_TRUE(Contains(status, "line 5")) << status;

  // 2^64 elements: a byte size of 0 in 64 bits.
  status = CompileStatus(R"(
HloModule zero
ENTRY e {
  c = f32[] constant(1)
  ROOT b = f32[4294967296,4294967296] broadcast(c), dimensions={}
})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;

  // Parameters and constants are checked the same way.
  status = CompileStatus(R"(
HloModule p
ENTRY e {
  ROOT p = f32[4294967296,4294967296,4294967296] parameter(0)
})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST_F(HostileProgramTest, PaddingThatOverflowsIsRefused) {
  absl::Status status = CompileStatus(R"(
HloModule pad
ENTRY e {
  x = f32[3] parameter(0)
  z = f32[] constant(0)
  ROOT p = f32[1] pad(x, z), padding=0_-9223372036854775806_4611686018427387904
})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "padding")) << status;
}

TEST_F(HostileProgramTest, SliceWithHugeStrideIsComputedWithoutOverflow) {
  auto e = Executable::Compile(client_.get(), R"(
HloModule s
ENTRY e {
  x = f32[4] parameter(0)
  ROOT s = f32[1] slice(x), slice={[1:4:9223372036854775807]}
})");
  ASSERT_TRUE(e.ok()) << e.status();
  auto x = Put(*client_, {1, 2, 3, 4});
  Buffer* args[] = {x.get()};
  auto results = (*e)->Execute(args, client_->devices()[0]);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(Read(*(*results)[0]), std::vector<float>{2});
}

TEST_F(HostileProgramTest, TuplesInferredByDoublingAreRefusedBeforeTheyGrow) {
  // t_{k+1} = (t_k, t_k), written without shapes: 2^k arrays after k lines.
  std::string text = "HloModule t\nENTRY e {\n  t0 = f32[2] parameter(0)\n";
  for (int k = 0; k < 60; ++k) {
    absl::StrAppendFormat(&text, "  t%d = tuple(t%d, t%d)\n", k + 1, k, k);
  }
  absl::StrAppend(&text,
                  "  ROOT r = f32[2] get-tuple-element(t1), index=0\n}\n");
  absl::Status status = hlo::ParseHloModule(text).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "arrays")) << status;
}

TEST_F(HostileProgramTest, TuplesOfEmptyTuplesAreBoundedToo) {
  // Empty tuples hold no arrays, but 2^40 of them still have to be walked.
  std::string text = "HloModule t\nENTRY e {\n  t0 = tuple()\n";
  for (int k = 0; k < 40; ++k) {
    absl::StrAppendFormat(&text, "  t%d = tuple(t%d, t%d)\n", k + 1, k, k);
  }
  absl::StrAppend(&text, "  ROOT r = () get-tuple-element(t40), index=0\n}\n");
  absl::Status status = hlo::ParseHloModule(text).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "tuples and arrays in all")) << status;
}

TEST_F(HostileProgramTest, ManyTuplesSharingABigOneCompileInLinearWork) {
  // Every t_i holds the 16383 arrays of `big`; copied per instruction,
  // 20,000 of them would take hundreds of millions of entries.
  std::string params;
  for (int i = 0; i < 16383; ++i)
    absl::StrAppend(&params, i ? ", " : "", "f32[]");
  std::string text = absl::StrCat(
      "HloModule share\nENTRY e {\n  big = (", params, ") parameter(0)\n",
      "  v0 = f32[] get-tuple-element(big), index=0\n");
  for (int i = 0; i < 20000; ++i) {
    absl::StrAppendFormat(&text,
                          "  t%d = tuple(big, v%d)\n"
                          "  v%d = f32[] get-tuple-element(t%d), index=1\n",
                          i, i, i + 1, i);
  }
  absl::StrAppend(&text, "  ROOT r = f32[] negate(v20000)\n}\n");
  auto module = hlo::ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(hlo::VerifyModule(**module, text).ok());
  auto program = compiler::host::CompileForHost(**module, {});
  ASSERT_TRUE(program.ok()) << program.status();
}

TEST_F(HostileProgramTest, IotaReplicaGroupsAreBoundedAcrossTheModule) {
  // Each list expands 30 bytes of text to 65,536 ids.
  std::string text =
      "HloModule g, replica_count=65536\n"
      "add { a = f32[] parameter(0)  b = f32[] parameter(1)  "
      "ROOT s = f32[] add(a, b) }\nENTRY e {\n"
      "  x = f32[4] parameter(0)\n";
  for (int i = 0; i < 100; ++i) {
    absl::StrAppendFormat(&text,
                          "  r%d = f32[4] all-reduce(x), "
                          "replica_groups=[65536,1]<=[65536], to_apply=add\n",
                          i);
  }
  absl::StrAppend(&text, "  ROOT o = f32[4] copy(r0)\n}\n");
  absl::Status status = hlo::ParseHloModule(text).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "expand to more than")) << status;
  status =
      hlo::ParseHloModule(
          "HloModule g\nENTRY e { x = f32[] parameter(0)\n"
          "  ROOT r = f32[] all-reduce(x), replica_groups=[1000000000,0]<=[0], "
          "to_apply=add }\nadd { a = f32[] parameter(0)  b = f32[] "
          "parameter(1)  ROOT s = f32[] add(a, b) }")
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST_F(HostileProgramTest, DynamicDimensionsAreRefusedAsUnsupported) {
  absl::Status status = CompileStatus(R"(
HloModule d
ENTRY e {
  ROOT p = f32[<=8] parameter(0)
})");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
}

TEST_F(HostileProgramTest, ErrorsQuoteABoundedExcerptOfLongLines) {
  // One line of a megabyte, with the error at its end.
  std::string text = "HloModule m\nENTRY e { ROOT c = f32[262144] constant({";
  for (int i = 0; i < 262144; ++i) absl::StrAppend(&text, i ? ",1" : "1");
  absl::StrAppend(&text, ", oops}) }\n");
  absl::Status status = hlo::ParseHloModule(text).status();
  ASSERT_FALSE(status.ok());
  EXPECT_LT(status.message().size(), 1024u) << status.message().size();
  EXPECT_TRUE(Contains(status, "...")) << status;
}

// --- depth and size of programs ---------------------------------------------

TEST_F(HostileProgramTest, LongElementwiseChainsCompileAndRunCorrectly) {
  // 20,000 adds, each using the previous: a recursive lowering would
  // overflow its stack long before the end.
  constexpr int kLength = 20000;
  std::string text =
      "HloModule chain\nENTRY e {\n  v0 = f32[4] parameter(0)\n"
      "  one = f32[] constant(1)\n"
      "  ones = f32[4] broadcast(one), dimensions={}\n";
  for (int i = 0; i < kLength; ++i) {
    absl::StrAppendFormat(&text, "  v%d = f32[4] add(v%d, ones)\n", i + 1, i);
  }
  absl::StrAppendFormat(&text, "  ROOT r = f32[4] negate(v%d)\n}\n", kLength);
  auto e = Executable::Compile(client_.get(), text);
  ASSERT_TRUE(e.ok()) << e.status();
  auto x = Put(*client_, {0, 1, 2, 3});
  Buffer* args[] = {x.get()};
  auto results = (*e)->Execute(args, client_->devices()[0]);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(
      Read(*(*results)[0]),
      (std::vector<float>{-kLength, -kLength - 1, -kLength - 2, -kLength - 3}));
}

TEST_F(HostileProgramTest, DiamondsOfReindexingsDoNotGrowExponentially) {
  // x_{k+1} = x_k[1:] reversed + x_k[:-1]: each level reads the one before
  // at two places. Fused naively, level 60 would evaluate 2^60 leaves.
  constexpr int kLevels = 60;
  std::string text =
      "HloModule diamond\nENTRY e {\n  x0 = f32[64] parameter(0)\n";
  for (int k = 0; k < kLevels; ++k) {
    const int n = 64 - k;
    absl::StrAppendFormat(&text,
                          "  a%d = f32[%d] slice(x%d), slice={[1:%d]}\n"
                          "  r%d = f32[%d] reverse(a%d), dimensions={0}\n"
                          "  b%d = f32[%d] slice(x%d), slice={[0:%d]}\n"
                          "  x%d = f32[%d] add(r%d, b%d)\n",
                          k, n - 1, k, n, k, n - 1, k, k, n - 1, k, n - 1,
                          k + 1, n - 1, k, k);
  }
  absl::StrAppendFormat(&text, "  ROOT out = f32[%d] copy(x%d)\n}\n",
                        64 - kLevels, kLevels);
  auto module = hlo::ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(hlo::VerifyModule(**module, text).ok());
  auto program = compiler::host::CompileForHost(**module, {});
  ASSERT_TRUE(program.ok()) << program.status();
  int64_t nodes = 0;
  for (const auto& step : (*program)->steps) {
    if (const auto* loop = std::get_if<compiler::host::LoopStep>(&step)) {
      nodes += loop->expr.size();
    }
  }
  EXPECT_LT(nodes, 100 * kLevels);
}

TEST_F(HostileProgramTest, LongCallChainsAreRefusedWithoutRecursion) {
  // 50,000 computations, each calling the next.
  constexpr int kDepth = 50000;
  const std::string text = ::pjrt::testing::CallChain(kDepth + 1);
  absl::Status status = CompileStatus(text);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "more than 64 computations deep")) << status;
}

TEST_F(HostileProgramTest, CallGraphsThatExplodeWhenInlinedAreRefused) {
  // c_i calls c_{i+1} twice: 40 computations inline to 2^40 instructions.
  const std::string text = ::pjrt::testing::CallTree(40);
  absl::Status status = CompileStatus(text);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "inlined")) << status;
}

// --- replicas, partitions, groups
// ---------------------------------------------

TEST_F(HostileProgramTest, ReplicaCountsOutOfRangeAreRefusedAtCompileTime) {
  for (const char* count :
       {"4294967297", "4294967295", "2147483648", "65537", "0", "-1"}) {
    absl::Status status = CompileStatus(
        absl::StrCat("HloModule r, replica_count=", count,
                     "\nENTRY e {\n  ROOT c = f32[] constant(1)\n}\n"));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << count << ": " << status;
  }
  // Each alone is fine; their product is not.
  absl::Status status = CompileStatus(
      "HloModule r, replica_count=65536, num_partitions=65536\n"
      "ENTRY e {\n  ROOT c = f32[] constant(1)\n}\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "at most 65536")) << status;
  CompileOptions options;
  options.num_replicas = 1 << 20;
  status = CompileStatus("HloModule r\nENTRY e { ROOT c = f32[] constant(1) }",
                         options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

constexpr char kAllReduceHeader[] = R"(
HloModule g, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
)";

// An all-reduce over both replicas, waiting at most `timeout` for a peer.
absl::StatusOr<std::shared_ptr<Executable>> CompileAllReduce(
    Client* client, absl::Duration timeout) {
  return Executable::Compile(
      client,
      absl::StrCat(kAllReduceHeader,
                   "  ROOT r = f32[4] all-reduce(x), replica_groups={}, "
                   "to_apply=add\n}\n"),
      CompileOptions{.collective_timeout = timeout});
}

TEST_F(HostileProgramTest, MalformedReplicaGroupsAreRefusedAtCompileTime) {
  struct Case {
    const char* groups;
    const char* message;
  };
  for (const Case& c : {Case{"{{0,0},{1}}", "more than once"},
                        Case{"{{0,2}}", "names replica 2"},
                        Case{"{{0}}", "leaves out replica 1"},
                        Case{"{{0},{},{1}}", "empty group"}}) {
    absl::Status status = CompileStatus(absl::StrCat(
        kAllReduceHeader, "  ROOT r = f32[4] all-reduce(x), replica_groups=",
        c.groups, ", to_apply=add\n}\n"));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << c.groups << ": " << status;
    EXPECT_TRUE(Contains(status, c.message)) << c.groups << ": " << status;
  }
  absl::Status status =
      CompileStatus(absl::StrCat(kAllReduceHeader,
                                 "  ROOT r = f32[4] collective-permute(x), "
                                 "source_target_pairs={{0,1},{1,1}}\n}\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "twice as a target")) << status;
  status =
      CompileStatus(absl::StrCat(kAllReduceHeader,
                                 "  ROOT r = f32[12] all-gather(x), "
                                 "dimensions={0}, replica_groups={}\n}\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(Contains(status, "group of 2")) << status;
}

// --- launches ---------------------------------------------------------------

TEST_F(HostileProgramTest, ShardedCallsOfDifferentScopesNeverJoinOneLaunch) {
  auto e = CompileAllReduce(client_.get(), absl::Milliseconds(300));
  ASSERT_TRUE(e.ok()) << e.status();
  auto a = Put(*client_, {1, 2, 3, 4}, 0);
  auto b = Put(*client_, {10, 20, 30, 40}, 1);
  Buffer* a_args[] = {a.get()};
  Buffer* b_args[] = {b.get()};
  // Same launch id, different scopes (sessions): neither sees the other's
  // data; both time out waiting for their own peer.
  auto ra = (*e)->ExecuteSharded(a_args, client_->devices()[0],
                                 {.launch_id = 7, .launch_scope = 1});
  auto rb = (*e)->ExecuteSharded(b_args, client_->devices()[1],
                                 {.launch_id = 7, .launch_scope = 2});
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ((*ra)[0]->BlockHostUntilReady().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*rb)[0]->BlockHostUntilReady().code(),
            absl::StatusCode::kDeadlineExceeded);
  // The same scope meets.
  auto ca = (*e)->ExecuteSharded(a_args, client_->devices()[0],
                                 {.launch_id = 8, .launch_scope = 1});
  auto cb = (*e)->ExecuteSharded(b_args, client_->devices()[1],
                                 {.launch_id = 8, .launch_scope = 1});
  ASSERT_TRUE(ca.ok() && cb.ok());
  EXPECT_EQ(Read(*(*ca)[0]), (std::vector<float>{11, 22, 33, 44}));
}

TEST_F(HostileProgramTest, APartStartedTwiceInOneLaunchIsRefused) {
  auto e = CompileAllReduce(client_.get(), absl::Milliseconds(300));
  ASSERT_TRUE(e.ok()) << e.status();
  auto a = Put(*client_, {1, 2, 3, 4}, 0);
  Buffer* args[] = {a.get()};
  auto first =
      (*e)->ExecuteSharded(args, client_->devices()[0], {.launch_id = 9});
  ASSERT_TRUE(first.ok()) << first.status();
  // Twice as replica 0 would complete the rendezvous without replica 1.
  auto second =
      (*e)->ExecuteSharded(args, client_->devices()[0], {.launch_id = 9});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(second.status(), "already started")) << second.status();
  EXPECT_EQ((*first)[0]->BlockHostUntilReady().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(HostileProgramTest, ALoneParticipantDoesNotHoldUpTheDevice) {
  auto e = CompileAllReduce(client_.get(), absl::Hours(1));
  ASSERT_TRUE(e.ok()) << e.status();
  auto cancellation = std::make_shared<Cancellation>();
  auto a = Put(*client_, {1, 2, 3, 4}, 0);
  Buffer* args[] = {a.get()};
  auto lone =
      (*e)->ExecuteSharded(args, client_->devices()[0],
                           {.launch_id = 5, .cancellation = cancellation});
  ASSERT_TRUE(lone.ok()) << lone.status();
  // Other work on the same device runs meanwhile.
  auto single = Executable::Compile(client_.get(), R"(
HloModule one
ENTRY e { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) })");
  ASSERT_TRUE(single.ok()) << single.status();
  auto other = (*single)->Execute(args, client_->devices()[0]);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(Read(*(*other)[0]), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_FALSE((*lone)[0]->IsReady());
  // Cancelling ends the wait within milliseconds, with the reason.
  const absl::Time start = absl::Now();
  cancellation->Cancel(absl::CancelledError("session 3 was closed"));
  absl::Status status = (*lone)[0]->BlockHostUntilReady(absl::Seconds(30));
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_TRUE(Contains(status, "session 3 was closed")) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// --- runs that never end ----------------------------------------------------

TEST_F(HostileProgramTest, CancellingARunStopsItAndFailsItsResults) {
  // A product of two 4096 x 4096 matrices: 1.4e11 flops, seconds of work.
  auto client = MakeClient(device::AllocationModel::kSynchronous, 1, 1 << 30);
  auto program = Executable::Compile(client.get(), R"(
HloModule long
ENTRY e {
  a = f32[4096,4096] iota(), iota_dimension=0
  b = f32[4096,4096] iota(), iota_dimension=1
  ROOT d = f32[4096,4096] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_TRUE(program.ok()) << program.status();
  auto cancellation = std::make_shared<Cancellation>();
  auto results = (*program)->Execute({}, client->devices()[0],
                                     {.cancellation = cancellation});
  ASSERT_TRUE(results.ok()) << results.status();
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  cancellation->Cancel(absl::CancelledError("stop"));
  absl::Status status = (*results)[0]->BlockHostUntilReady(absl::Seconds(60));
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // A run cut short does not make the program look quick (the daemon runs
  // quick programs on the calling thread).
  EXPECT_EQ((*program)->recent_run_time(), absl::InfiniteDuration());
}

TEST_F(HostileProgramTest, RunTimesAreMeasuredForRunsThatFinish) {
  auto program = Executable::Compile(client_.get(), R"(
HloModule quick
ENTRY e { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) })");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->recent_run_time(), absl::InfiniteDuration());
  auto a = Put(*client_, {1, 2, 3, 4}, 0);
  Buffer* args[] = {a.get()};
  for (int i = 0; i < 3; ++i) {
    auto results = (*program)->Execute(args, client_->devices()[0]);
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_TRUE((*results)[0]->BlockHostUntilReady().ok());
  }
  EXPECT_LT((*program)->recent_run_time(), absl::Seconds(10));
  EXPECT_GT((*program)->recent_run_time(), absl::ZeroDuration());
}

TEST_F(HostileProgramTest, WaitsForInputsThatNeverComeCanBeCancelled) {
  // An input whose producer never enqueues (a cross-host receive whose data
  // never comes).
  auto pending = std::make_shared<BufferSequencingEvent>();
  auto stream = client_->devices()[0]->local_device_state()->compute_stream();
  Cancellation cancellation(nullptr, absl::Now() + absl::Milliseconds(100));
  absl::Status status = pending->WaitForEventOnStream(stream, &cancellation);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(Contains(status, "not arrived")) << status;
  pending->SetError(absl::CancelledError("done"));
}

TEST(Cancellation, ReportsItsOwnReasonAnAncestorsOrTheDeadline) {
  auto parent = std::make_shared<Cancellation>();
  Cancellation child(parent);
  EXPECT_TRUE(child.Check().ok());
  parent->Cancel(absl::UnavailableError("shutting down"));
  EXPECT_EQ(child.Check().code(), absl::StatusCode::kUnavailable);
  parent->Cancel(absl::CancelledError("second reason is ignored"));
  EXPECT_EQ(parent->Check().message(), "shutting down");

  Cancellation timed(nullptr, absl::Now() - absl::Seconds(1));
  EXPECT_EQ(timed.Check().code(), absl::StatusCode::kDeadlineExceeded);
  bool gone = false;
  Cancellation probed(nullptr, absl::InfiniteFuture(), [&] {
    return gone ? absl::CancelledError("client went away") : absl::OkStatus();
  });
  EXPECT_FALSE(probed.IsCancelled());
  gone = true;
  EXPECT_TRUE(probed.IsCancelled());
}

// --- the last line of defence ----------------------------------------------

TEST(HostProgramBounds, AnAccessOutsideItsSlotIsRefused) {
  using compiler::host::BufferSlot;
  using compiler::host::CopyStep;
  using compiler::host::HostProgram;
  HostProgram program;
  hlo::Shape f32x4(hlo::PrimitiveType::kF32, {4});
  program.parameter_shapes_ = {f32x4};
  program.result_shapes_ = {f32x4};
  BufferSlot param{.kind = BufferSlot::Kind::kParameter,
                   .index = 0,
                   .bytes = 16,
                   .shape = f32x4};
  BufferSlot result{.kind = BufferSlot::Kind::kResult,
                    .index = 0,
                    .bytes = 16,
                    .shape = f32x4};
  program.slots = {param, result};
  CopyStep copy;
  copy.src = 0;
  copy.dst = 1;
  copy.element_bytes = 4;
  copy.dims = {4};
  copy.src_map = {0, {1}};
  copy.dst_map = {0, {1}};
  program.steps = {copy};
  EXPECT_TRUE(program.CheckBounds().ok());
  // One element past the end of the source.
  std::get<CopyStep>(program.steps[0]).src_map.offset = 1;
  absl::Status status = program.CheckBounds();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_TRUE(Contains(status, "copy source")) << status;
  // A stride that wraps around.
  std::get<CopyStep>(program.steps[0]).src_map = {0, {INT64_MAX}};
  EXPECT_FALSE(program.CheckBounds().ok());
}

}  // namespace
}  // namespace pjrt::runtime
