// Replicated, sharded and portable execution; collectives between host
// devices; donation; tuple arguments and results. In process, no daemon.
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "runtime/executable.h"
#include "tests/unit/runtime_test_util.h"

namespace pjrt::runtime {
namespace {

using testing::BytesInUse;
using testing::MakeClient;
using testing::SyncAll;

class ReplicatedTest : public ::testing::Test {
 protected:
  std::unique_ptr<Client> client_ =
      MakeClient(device::AllocationModel::kSynchronous, 4, 64 << 20, 4);

  std::shared_ptr<Executable> Compile(const std::string& text,
                                      CompileOptions options = {}) {
    auto e = Executable::Compile(client_.get(), text, options);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : nullptr;
  }

  std::shared_ptr<Buffer> Put(std::vector<float> v, int device) {
    auto b = client_->BufferFromHostBuffer(
        v.data(),
        hlo::Shape(hlo::PrimitiveType::kF32, {static_cast<int64_t>(v.size())}),
        client_->devices()[device]);
    EXPECT_TRUE(b.ok()) << b.status();
    return *b;
  }

  std::vector<float> Read(Buffer& b) {
    std::vector<float> out(b.size_bytes() / 4);
    absl::Status s = b.CopyRawToHost(out.data(), 0, b.size_bytes());
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  // Runs a program taking no arguments on every device of its assignment.
  std::vector<std::vector<std::shared_ptr<Buffer>>> RunNoArgs(Executable& e) {
    std::vector<std::vector<Buffer*>> args(e.addressable_devices().size());
    auto results = e.ExecuteReplicated(args);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? *results
                        : std::vector<std::vector<std::shared_ptr<Buffer>>>{};
  }
};

// x_r[i] = 10 * r + i over f32[8], built from replica-id.
constexpr char kReplicaInput[] = R"(
  rid = u32[] replica-id()
  rf = f32[] convert(rid)
  ten = f32[] constant(10)
  r10 = f32[] multiply(rf, ten)
  b = f32[8] broadcast(r10), dimensions={}
  i = f32[8] iota(), iota_dimension=0
  x = f32[8] add(b, i)
)";

// Sums kReplicaInput over every replica of `replica_count`; the all-reduce
// is %ar on line 13.
std::string SumOverReplicas(absl::string_view module, int replica_count) {
  return absl::StrCat("\nHloModule ", module, ", replica_count=", replica_count,
                      R"(
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {)",
                      kReplicaInput, R"(
  ROOT ar = f32[8] all-reduce(x), replica_groups={}, to_apply=add
})");
}

std::vector<float> ReplicaInput(int r) {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = 10.0f * r + i;
  return v;
}

TEST_F(ReplicatedTest, AllReduceSumsOverFourReplicas) {
  auto e = Compile(SumOverReplicas("ar", 4));
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->addressable_devices().size(), 4u);
  auto results = RunNoArgs(*e);
  std::vector<float> expected(8, 0);
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 8; ++i) expected[i] += ReplicaInput(r)[i];
  }
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(Read(*results[r][0]), expected) << "replica " << r;
}

TEST_F(ReplicatedTest, AllReduceWithinReplicaGroupsMaxAndMultiply) {
  auto e = Compile(std::string(R"(
HloModule ar2, replica_count=4
mx { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }
ml { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] multiply(a, b) }
ENTRY e {)") + kReplicaInput +
                   R"(
  m = f32[8] all-reduce(x), replica_groups={{0,2},{1,3}}, to_apply=mx
  p = f32[8] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=ml
  ROOT t = (f32[8], f32[8]) tuple(m, p)
})");
  ASSERT_NE(e, nullptr);
  auto results = RunNoArgs(*e);
  for (int r = 0; r < 4; ++r) {
    const int partner_max = r ^ 2, partner_mul = r ^ 1;
    std::vector<float> mx(8), ml(8);
    for (int i = 0; i < 8; ++i) {
      mx[i] = std::max(ReplicaInput(r)[i], ReplicaInput(partner_max)[i]);
      ml[i] = ReplicaInput(r)[i] * ReplicaInput(partner_mul)[i];
    }
    EXPECT_EQ(Read(*results[r][0]), mx) << "replica " << r;
    EXPECT_EQ(Read(*results[r][1]), ml) << "replica " << r;
  }
}

TEST_F(ReplicatedTest, AllGatherReduceScatterAllToAllAndPermute) {
  auto e = Compile(std::string(R"(
HloModule coll, replica_count=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {)") + kReplicaInput +
                   R"(
  g = f32[32] all-gather(x), replica_groups={}, dimensions={0}
  rs = f32[2] reduce-scatter(x), replica_groups={}, dimensions={0}, to_apply=add
  a2a = f32[8] all-to-all(x), replica_groups={}, dimensions={0}
  cp = f32[8] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3}}
  ROOT t = (f32[32], f32[2], f32[8], f32[8]) tuple(g, rs, a2a, cp)
})");
  ASSERT_NE(e, nullptr);
  auto results = RunNoArgs(*e);
  std::vector<float> gathered;
  for (int r = 0; r < 4; ++r) {
    auto v = ReplicaInput(r);
    gathered.insert(gathered.end(), v.begin(), v.end());
  }
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(Read(*results[r][0]), gathered);
    std::vector<float> scattered(2, 0), a2a(8);
    for (int q = 0; q < 4; ++q) {
      for (int j = 0; j < 2; ++j) {
        scattered[j] += ReplicaInput(q)[2 * r + j];
        a2a[2 * q + j] = ReplicaInput(q)[2 * r + j];
      }
    }
    EXPECT_EQ(Read(*results[r][1]), scattered);
    EXPECT_EQ(Read(*results[r][2]), a2a);
    EXPECT_EQ(Read(*results[r][3]),
              r == 0 ? std::vector<float>(8, 0) : ReplicaInput(r - 1));
  }
}

TEST_F(ReplicatedTest, CrossPartitionAllReduceWithGlobalDeviceIds) {
  auto e = Compile(R"(
HloModule parts, replica_count=2, num_partitions=2
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  two = u32[] constant(2)
  r2 = u32[] multiply(r, two)
  id = u32[] add(r2, p)
  v = s32[] convert(id)
  b = s32[4] broadcast(v), dimensions={}
  across = s32[4] all-reduce(b), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
  ROOT t = (u32[], u32[], s32[4]) tuple(r, p, across)
})");
  ASSERT_NE(e, nullptr);
  auto results = RunNoArgs(*e);
  ASSERT_EQ(results.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    uint32_t r, p;
    ASSERT_TRUE(results[i][0]->CopyRawToHost(&r, 0, 4).ok());
    ASSERT_TRUE(results[i][1]->CopyRawToHost(&p, 0, 4).ok());
    EXPECT_EQ(r, static_cast<uint32_t>(i / 2));
    EXPECT_EQ(p, static_cast<uint32_t>(i % 2));
    std::vector<int32_t> sum(4);
    ASSERT_TRUE(results[i][2]->CopyRawToHost(sum.data(), 0, 16).ok());
    // Groups of flattened ids {0,1} and {2,3}: sums 1 and 5.
    EXPECT_EQ(sum, std::vector<int32_t>(4, i < 2 ? 1 : 5));
  }
}

TEST_F(ReplicatedTest, MissingPeerEndsInADeadlineNamingIt) {
  CompileOptions options;
  options.collective_timeout = absl::Milliseconds(200);
  auto e = Compile(SumOverReplicas("lonely", 2), options);
  ASSERT_NE(e, nullptr);
  // Without a launch id the peers could not find each other.
  EXPECT_EQ(e->ExecuteSharded({}, client_->devices()[0]).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Only replica 0 runs; replica 1 never comes.
  ExecuteRunOptions run;
  run.launch_id = 7;
  auto results = e->ExecuteSharded({}, client_->devices()[0], run);
  ASSERT_TRUE(results.ok()) << results.status();
  absl::Status status = (*results)[0]->BlockHostUntilReady();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(
      status.message().find("all-reduce %ar (line 13): replica 1 partition 0"),
      absl::string_view::npos)
      << status;
}

TEST_F(ReplicatedTest, ShardedCallsWithOneLaunchIdMeet) {
  auto e = Compile(SumOverReplicas("sharded", 2));
  ASSERT_NE(e, nullptr);
  ExecuteRunOptions options;
  options.launch_id = 42;
  auto r0 = e->ExecuteSharded({}, client_->devices()[0], options);
  auto r1 = e->ExecuteSharded({}, client_->devices()[1], options);
  ASSERT_TRUE(r0.ok() && r1.ok());
  std::vector<float> expected(8);
  for (int i = 0; i < 8; ++i)
    expected[i] = ReplicaInput(0)[i] + ReplicaInput(1)[i];
  EXPECT_EQ(Read(*(*r0)[0]), expected);
  EXPECT_EQ(Read(*(*r1)[0]), expected);
}

TEST_F(ReplicatedTest, AFailingReplicaFailsTheLaunchNamingIt) {
  auto e = Compile(R"(
HloModule f, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(x), replica_groups={}, to_apply=add
})");
  ASSERT_NE(e, nullptr);
  auto good = Put({1, 2, 3, 4}, 0);
  auto bad = Put({1, 2, 3, 4}, 1);
  bad->Delete();
  auto results = e->ExecuteReplicated({{good.get()}, {bad.get()}});
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(results.status().message().find("replica 1 partition 0"),
            absl::string_view::npos)
      << results.status();
  // A wrong device names the replica too, and nothing runs.
  auto wrong = e->ExecuteReplicated({{good.get()}, {good.get()}});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find(
                "replica 1 partition 0: argument 0 is on device host:0"),
            absl::string_view::npos)
      << wrong.status();
}

TEST_F(ReplicatedTest, BadDeviceAssignmentsSayWhatIsWrong) {
  const std::string text = R"(
HloModule a
ENTRY e { x = f32[2] parameter(0)  ROOT n = f32[2] negate(x) })";
  CompileOptions options;
  options.num_replicas = 2;
  options.device_assignment = {{0}};
  auto rows = Executable::Compile(client_.get(), text, options);
  EXPECT_NE(rows.status().message().find("1 row(s) but the program has 2"),
            absl::string_view::npos)
      << rows.status();
  options.device_assignment = {{0}, {9}};
  auto unknown = Executable::Compile(client_.get(), text, options);
  EXPECT_NE(unknown.status().message().find("device 9"),
            absl::string_view::npos)
      << unknown.status();
  options.device_assignment = {{3}, {3}};
  auto twice = Executable::Compile(client_.get(), text, options);
  EXPECT_NE(twice.status().message().find("device 3 appears twice"),
            absl::string_view::npos)
      << twice.status();
  options.device_assignment = {};
  options.num_replicas = 8;
  auto too_many = Executable::Compile(client_.get(), text, options);
  EXPECT_NE(too_many.status().message().find("runs on 8 devices"),
            absl::string_view::npos)
      << too_many.status();
  for (const auto* s : {&rows, &unknown, &twice, &too_many}) {
    EXPECT_EQ(s->status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(ReplicatedTest, ExplicitAssignmentAndPortableExecution) {
  const std::string text = R"(
HloModule a
ENTRY e { x = f32[2] parameter(0)  ROOT n = f32[2] negate(x) })";
  CompileOptions options;
  options.num_replicas = 2;
  options.device_assignment = {{3}, {1}};
  auto e = Compile(text, options);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->addressable_devices()[0]->id(), 3);
  auto a = Put({1, 2}, 3), b = Put({3, 4}, 1);
  auto results = e->ExecuteReplicated({{a.get()}, {b.get()}});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(Read(*(*results)[1][0]), std::vector<float>({-3, -4}));
  EXPECT_EQ((*results)[1][0]->device()->id(), 1);

  CompileOptions portable;
  portable.portable = true;
  auto p = Compile(text, portable);
  ASSERT_NE(p, nullptr);
  auto c = Put({5, 6}, 2);
  auto out = p->ExecutePortable({c.get()}, client_->devices()[2]);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read(*(*out)[0]), std::vector<float>({-5, -6}));
  EXPECT_EQ(
      e->ExecutePortable({a.get()}, client_->devices()[3]).status().code(),
      absl::StatusCode::kInvalidArgument);
}

constexpr char kSgdStep[] = R"(
HloModule sgd, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  w = f32[1024] parameter(0)
  g = f32[1024] parameter(1)
  lr = f32[] constant(0.5)
  b = f32[1024] broadcast(lr), dimensions={}
  s = f32[1024] multiply(b, g)
  ROOT n = f32[1024] subtract(w, s)
})";

TEST_F(ReplicatedTest, DonationReusesTheArgumentsMemory) {
  auto e = Compile(kSgdStep);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->donated_parameters(), std::vector<int>({0}));
  auto w = Put(std::vector<float>(1024, 1), 0);
  auto g = Put(std::vector<float>(1024, 2), 0);
  SyncAll(*client_);
  const int64_t before = BytesInUse(*client_);
  auto out = e->Execute({w.get(), g.get()}, client_->devices()[0]);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read(*(*out)[0]), std::vector<float>(1024, 0));
  SyncAll(*client_);
  // No more and no less: the result took w's memory.
  EXPECT_EQ(BytesInUse(*client_), before);
  float x;
  absl::Status used = w->CopyRawToHost(&x, 0, 4);
  EXPECT_EQ(used.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(used.message().find("donated"), absl::string_view::npos) << used;
}

TEST_F(ReplicatedTest, ABufferUnderAnExternalReferenceIsNotDonated) {
  auto e = Compile(kSgdStep);
  ASSERT_NE(e, nullptr);
  auto w = Put(std::vector<float>(1024, 1), 0);
  auto g = Put(std::vector<float>(1024, 2), 0);
  auto reference = w->AcquireExternalReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto out = e->Execute({w.get(), g.get()}, client_->devices()[0]);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(out.status().message().find("external reference"),
            absl::string_view::npos)
      << out.status();
  reference->reset();
  // The refused launch left the buffer intact.
  EXPECT_EQ(Read(*w), std::vector<float>(1024, 1));
}

TEST_F(ReplicatedTest, AliasingAnElementOfAnArrayResultIsRejected) {
  auto e = Executable::Compile(client_.get(), R"(
HloModule bad, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e { p = f32[4] parameter(0)  ROOT n = f32[4] negate(p) })",
                               {});
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("an array is aliased as {}"),
            absl::string_view::npos)
      << e.status();
}

TEST_F(ReplicatedTest, NonDonatableParametersAreCopiedInstead) {
  CompileOptions options;
  options.non_donatable_parameters = {0};
  auto e = Compile(kSgdStep, options);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->donated_parameters().empty());
  auto w = Put(std::vector<float>(1024, 1), 0);
  auto g = Put(std::vector<float>(1024, 2), 0);
  SyncAll(*client_);
  const int64_t before = BytesInUse(*client_);
  auto out = e->Execute({w.get(), g.get()}, client_->devices()[0]);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read(*(*out)[0]), std::vector<float>(1024, 0));
  EXPECT_EQ(Read(*w), std::vector<float>(1024, 1));
  SyncAll(*client_);
  EXPECT_EQ(BytesInUse(*client_), before + 4096);
}

TEST_F(ReplicatedTest,
       DonatedResultThatReadsItsInputNonElementwiseStaysCorrect) {
  // The result reverses the donated input: it must not be written in place.
  auto e = Compile(R"(
HloModule rev, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  w = f32[4] parameter(0)
  ROOT r = f32[4] reverse(w), dimensions={0}
})");
  ASSERT_NE(e, nullptr);
  auto w = Put({1, 2, 3, 4}, 0);
  auto out = e->Execute({w.get()}, client_->devices()[0]);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read(*(*out)[0]), std::vector<float>({4, 3, 2, 1}));
}

TEST_F(ReplicatedTest, TupleParameterTakesTheElementsOrATupleBuffer) {
  auto e = Compile(R"(
HloModule tup
ENTRY e {
  p = (f32[2], f32[2]) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  b = f32[2] get-tuple-element(p), index=1
  s = f32[2] add(a, b)
  ROOT t = (f32[2], f32[2]) tuple(s, a)
})");
  ASSERT_NE(e, nullptr);
  auto a = Put({1, 2}, 0), b = Put({10, 20}, 0);
  auto listed = e->Execute({a.get(), b.get()}, client_->devices()[0]);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ(Read(*(*listed)[0]), std::vector<float>({11, 22}));

  auto tuple = Buffer::MakeTuple(client_.get(), client_->devices()[0], {a, b});
  ExecuteRunOptions tupled;
  tupled.arguments_are_tupled = true;
  tupled.untuple_result = false;
  auto whole = e->Execute({tuple.get()}, client_->devices()[0], tupled);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), 1u);
  ASSERT_TRUE((*whole)[0]->is_tuple());
  EXPECT_EQ(Read(*(*whole)[0]->tuple_elements()[1]),
            std::vector<float>({1, 2}));
  EXPECT_TRUE((*whole)[0]->BlockHostUntilReady().ok());
  float x;
  EXPECT_EQ((*whole)[0]->CopyRawToHost(&x, 0, 4).code(),
            absl::StatusCode::kInvalidArgument);
  auto wrong = e->Execute({a.get()}, client_->devices()[0]);
  EXPECT_NE(wrong.status().message().find("pass its 2 elements"),
            absl::string_view::npos)
      << wrong.status();
}

TEST_F(ReplicatedTest, ReplicaIdsFollowTheAssignment) {
  auto e = Compile(R"(
HloModule ids, replica_count=4
ENTRY e { ROOT r = u32[] replica-id() })");
  ASSERT_NE(e, nullptr);
  auto results = RunNoArgs(*e);
  for (uint32_t r = 0; r < 4; ++r) {
    uint32_t v;
    ASSERT_TRUE(results[r][0]->CopyRawToHost(&v, 0, 4).ok());
    EXPECT_EQ(v, r);
  }
}

}  // namespace
}  // namespace pjrt::runtime
