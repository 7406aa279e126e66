// Integration tests of the executable path: a real pjrtd, the C++ client and
// pjrtctl compile/run, over a unix socket and over TCP.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/npy.h"
#include "client/cpp/pjrt_client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pjrt/v1/executable.grpc.pb.h"
#include "tests/integration/daemon_suite.h"
#include "tests/integration/process.h"

namespace pjrt::testing {
namespace {

namespace v1 = ::pjrt::v1;
using ::nlohmann::json;

// f32[n] + f32[n], named `name` so that each test has a program of its own in
// the daemon-wide cache.
std::string AddProgram(const std::string& name, int n = 4) {
  return absl::StrReplaceAll(
      R"(HloModule @NAME@, entry_computation_layout={(f32[@N@]{0}, f32[@N@]{0})->f32[@N@]{0}}

ENTRY main.4 {
  Arg_0.1 = f32[@N@]{0} parameter(0)
  Arg_1.2 = f32[@N@]{0} parameter(1)
  ROOT add.3 = f32[@N@]{0} add(Arg_0.1, Arg_1.2)
}
)",
      {{"@NAME@", name}, {"@N@", absl::StrCat(n)}});
}

// (x * 2, x - 1, sum(x)) for x: s32[2,3]: a tuple root with three results.
constexpr char kTupleProgram[] = R"(HloModule tuple_results

region_add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}

ENTRY main {
  x = s32[2,3] parameter(0)
  two = s32[] constant(2)
  one = s32[] constant(1)
  zero = s32[] constant(0)
  twos = s32[2,3] broadcast(two), dimensions={}
  ones = s32[2,3] broadcast(one), dimensions={}
  doubled = s32[2,3] multiply(x, twos)
  less = s32[2,3] subtract(x, ones)
  total = s32[] reduce(x, zero), dimensions={0,1}, to_apply=region_add
  ROOT t = (s32[2,3], s32[2,3], s32[]) tuple(doubled, less, total)
}
)";

template <typename T>
std::vector<T> FromBytes(const std::vector<uint8_t>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

class ExecutableTest : public DaemonSuite<ExecutableTest> {
 protected:
  static void SetUpTestSuite() {
    // PJRT_TEST_PLATFORM=cuda (scripts/gpu-check) runs the suite on a GPU.
    const char* platform = std::getenv("PJRT_TEST_PLATFORM");
    std::vector<std::string> args = {"--platform",
                                     platform != nullptr ? platform : "host"};
    if (platform == nullptr || std::string(platform) == "host") {
      args.insert(args.end(), {"--host-devices", "3"});
    } else {
      args.insert(args.end(), {"--compile-cache-dir", SuiteDir() + "/kernels"});
    }
    args.insert(args.end(), {"--memory-limit", "1GiB"});
    StartDaemon(args);
  }

  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    auto client = pjrt_client::Client::Connect({.address = address()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
    session_ = OpenSession("executable_test");
  }

  void TearDown() override {
    session_.reset();
    ExpectHealthy();
  }

  std::unique_ptr<pjrt_client::Session> OpenSession(const std::string& name) {
    auto session = client_->OpenSession({.client_name = name});
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  // A name unique to this test and transport.
  std::string UniqueName(const std::string& base) const {
    return absl::StrCat(base, "_", GetParam() == 0 ? "unix" : "tcp");
  }

  pjrt_client::Stats Stats() {
    auto stats = client_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : pjrt_client::Stats();
  }

  pjrt_client::Buffer UploadF32(const std::vector<float>& values,
                                int device = 0) {
    auto buffer = session_->Upload(pjrt_client::DType::kF32,
                                   {static_cast<int64_t>(values.size())},
                                   pjrt_client::AsBytes(values), device);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return buffer.ok() ? *std::move(buffer) : pjrt_client::Buffer();
  }

  CommandResult Pjrtctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {PJRTCTL_PATH, "--address", address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = dir_->path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  std::shared_ptr<pjrt_client::Client> client_;
  std::unique_ptr<pjrt_client::Session> session_;
};

INSTANTIATE_TEST_SUITE_P(Transports, ExecutableTest, ::testing::Values(0, 1),
                         TransportName);

// --- compile -----------------------------------------------------------------

TEST_P(ExecutableTest, CompileReturnsTheSignature) {
  auto executable = session_->Compile(AddProgram(UniqueName("signature"), 5));
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_EQ(executable->name(), UniqueName("signature"));
  ASSERT_EQ(executable->parameter_shapes().size(), 2);
  EXPECT_EQ(pjrt_client::ShapeToString(executable->parameter_shapes()[0]),
            "f32[5]");
  ASSERT_EQ(executable->result_shapes().size(), 1);
  EXPECT_EQ(pjrt_client::ShapeToString(executable->result_shapes()[0]),
            "f32[5]");
  EXPECT_FALSE(executable->result_is_tuple());
  EXPECT_FALSE(executable->cache_hit());
  EXPECT_GT(executable->compile_time(), absl::ZeroDuration());
  EXPECT_EQ(executable->fingerprint().size(), 64u);
  EXPECT_NE(executable->handle(), 0u);
}

TEST_P(ExecutableTest, SecondCompileFromAnotherSessionIsACacheHit) {
  const std::string program = AddProgram(UniqueName("cached"));
  const int64_t compiles_before = Stats().compile_cache.compiles;
  auto first = session_->Compile(program);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit());

  auto other = OpenSession("other");
  auto second = other->Compile(program);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cache_hit());
  EXPECT_EQ(second->fingerprint(), first->fingerprint());
  EXPECT_NE(second->handle(), first->handle());
  EXPECT_EQ(Stats().compile_cache.compiles, compiles_before + 1);

  // A different program is a different entry.
  auto third = other->Compile(AddProgram(UniqueName("cached"), 8));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->cache_hit());
  EXPECT_NE(third->fingerprint(), first->fingerprint());
}

TEST_P(ExecutableTest, ConcurrentCompilesOfOneProgramCompileOnce) {
  const std::string program = AddProgram(UniqueName("concurrent"), 16);
  const int64_t compiles_before = Stats().compile_cache.compiles;
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<pjrt_client::Session>> sessions;
  for (int i = 0; i < kThreads; ++i) sessions.push_back(OpenSession("c"));
  std::vector<std::thread> threads;
  std::atomic<int> misses{0}, failures{0};
  std::vector<std::string> fingerprints(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto executable = sessions[i]->Compile(program);
      if (!executable.ok()) {
        ++failures;
        return;
      }
      if (!executable->cache_hit()) ++misses;
      fingerprints[i] = executable->fingerprint();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(misses, 1);
  EXPECT_EQ(Stats().compile_cache.compiles, compiles_before + 1);
  for (const std::string& f : fingerprints) EXPECT_EQ(f, fingerprints[0]);
}

TEST_P(ExecutableTest, CompileErrorsKeepTheirCodeAndFullMessage) {
  auto syntax = session_->Compile(
      "HloModule broken\n\nENTRY main {\n  p = f32[2] parameter(0)\n"
      "  ROOT r = f32[2] add(p, p\n}\n");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(syntax.status().message().find("line 6"), std::string::npos)
      << syntax.status();
  EXPECT_NE(syntax.status().message().find("^"), std::string::npos)
      << syntax.status();

  auto unknown = session_->Compile(
      "HloModule m\n\nENTRY main {\n  p = f32[2] parameter(0)\n"
      "  ROOT r = f32[2] frobnicate(p)\n}\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("frobnicate"), std::string::npos)
      << unknown.status();
  EXPECT_NE(unknown.status().message().find("line 5"), std::string::npos)
      << unknown.status();

  auto empty = session_->Compile("  \n");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("hlo_text is empty"),
            std::string::npos);
  ExpectHealthy();
}

// --- execute -----------------------------------------------------------------

TEST_P(ExecutableTest, ExecuteRoundTrip) {
  auto executable = session_->Compile(AddProgram(UniqueName("round_trip")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  pjrt_client::Buffer a = UploadF32({1, 2, 3, 4}, 1);
  pjrt_client::Buffer b = UploadF32({10, 20, 30, 40}, 1);
  auto results = executable->Execute({&a, &b}, 1);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  const pjrt_client::Buffer& sum = (*results)[0];
  EXPECT_EQ(sum.dtype(), pjrt_client::DType::kF32);
  EXPECT_EQ(sum.dims(), std::vector<int64_t>({4}));
  EXPECT_EQ(sum.device_id(), 1);
  auto bytes = sum.Download();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(FromBytes<float>(*bytes), std::vector<float>({11, 22, 33, 44}));
}

// Execute goes over an execute lane on its own (the daemon is on this
// host), with the results and errors of a gRPC call.
TEST_P(ExecutableTest, ExecuteOverALaneMatchesGrpc) {
  std::vector<std::vector<float>> sums;
  std::vector<std::string> errors;
  for (bool lanes : {true, false}) {
    auto client = pjrt_client::Client::Connect(
        {.address = address(), .execute_lanes = lanes});
    ASSERT_TRUE(client.ok()) << client.status();
    auto session = (*client)->OpenSession({.client_name = "lanes"});
    ASSERT_TRUE(session.ok()) << session.status();
    auto executable =
        (*session)->Compile(AddProgram(UniqueName("lane_round_trip")));
    ASSERT_TRUE(executable.ok()) << executable.status();
    std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40};
    auto x = (*session)->Upload(pjrt_client::DType::kF32, {4},
                                pjrt_client::AsBytes(a), 0);
    auto y = (*session)->Upload(pjrt_client::DType::kF32, {4},
                                pjrt_client::AsBytes(b), 0);
    ASSERT_TRUE(x.ok() && y.ok());
    // A dependent loop whose dropped results ride on the next request.
    pjrt_client::Buffer acc = *std::move(x);
    for (int i = 0; i < 50; ++i) {
      auto step = executable->Execute({&acc, &*y}, 0);
      ASSERT_TRUE(step.ok()) << step.status();
      acc = std::move((*step)[0]);
    }
    auto bytes = acc.Download();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    sums.push_back(FromBytes<float>(*bytes));
    auto wrong = executable->Execute({&acc}, 0);
    EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
    errors.push_back(std::string(wrong.status().message()));
    EXPECT_EQ((*session)->uses_execute_lanes(), lanes);
  }
  EXPECT_EQ(sums[0], std::vector<float>({501, 1002, 1503, 2004}));
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(errors[0], errors[1]);
}

// Runs `executable` on device 0 with `args` and downloads every result.
absl::StatusOr<std::vector<std::vector<uint8_t>>> RunAndRead(
    pjrt_client::Executable& executable,
    std::vector<pjrt_client::Buffer>& args) {
  std::vector<pjrt_client::Buffer*> pointers;
  for (auto& a : args) pointers.push_back(&a);
  auto outputs = executable.Execute(pointers, 0);
  if (!outputs.ok()) return outputs.status();
  std::vector<std::vector<uint8_t>> bytes;
  for (auto& o : *outputs) {
    auto d = o.Download();
    if (!d.ok()) return d.status();
    bytes.push_back(*std::move(d));
  }
  return bytes;
}

std::string ReadSourceFile(const std::string& relative) {
  std::ifstream file(absl::StrCat(PJRT_SOURCE_DIR, "/", relative));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The MLP training step of tests/data, as JAX prints it in StableHLO and in
// HLO text: through the C++ client the two give the same bytes, and the
// loss is the one a forward pass written here computes.
TEST_P(ExecutableTest, StableHloMlpStepMatchesItsHloTwinAndAForwardPass) {
  constexpr int kBatch = 64, kIn = 784, kHidden = 128, kOut = 10;
  // Deterministic inputs: scaled like the Python test's.
  uint64_t state = 12345;
  const auto uniform = [&]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
  };
  std::vector<float> w1(kIn * kHidden), b1(kHidden), w2(kHidden * kOut),
      b2(kOut), x(kBatch * kIn);
  for (float& v : w1) v = uniform() * 0.1f;
  for (float& v : b1) v = uniform() * 0.1f;
  for (float& v : w2) v = uniform() * 0.3f;
  for (float& v : b2) v = uniform() * 0.1f;
  for (float& v : x) v = uniform() * 2;
  std::vector<int32_t> labels(kBatch);
  for (int i = 0; i < kBatch; ++i) labels[i] = (i * 7) % kOut;

  std::vector<std::vector<std::vector<uint8_t>>> results;
  for (const char* file :
       {"tests/data/mlp_train_step.mlir", "tests/data/mlp_train_step.hlo"}) {
    // An executable of its own for each transport, run once: on the host
    // platform the last bit of an f32 product can depend on the runs before
    // (docs/testing.md), which is not what this compares.
    pjrt_client::CompileOptions options;
    options.collective_timeout = absl::Seconds(17 + GetParam());
    if (absl::EndsWith(file, ".mlir")) {
      options.program_format = pjrt_client::ProgramFormat::kStableHlo;
    }
    auto executable = session_->Compile(ReadSourceFile(file), options);
    ASSERT_TRUE(executable.ok()) << file << ": " << executable.status();
    ASSERT_EQ(executable->result_shapes().size(), 5);
    std::vector<pjrt_client::Buffer> args;
    const auto upload = [&](pjrt_client::DType type, std::vector<int64_t> dims,
                            auto& data) {
      auto b = session_->Upload(type, dims, pjrt_client::AsBytes(data), 0);
      ASSERT_TRUE(b.ok()) << b.status();
      args.push_back(*std::move(b));
    };
    upload(pjrt_client::DType::kF32, {kIn, kHidden}, w1);
    upload(pjrt_client::DType::kF32, {kHidden}, b1);
    upload(pjrt_client::DType::kF32, {kHidden, kOut}, w2);
    upload(pjrt_client::DType::kF32, {kOut}, b2);
    upload(pjrt_client::DType::kF32, {kBatch, kIn}, x);
    upload(pjrt_client::DType::kS32, {kBatch}, labels);
    auto bytes = RunAndRead(*executable, args);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    results.push_back(*std::move(bytes));
  }
  ASSERT_EQ(results.size(), 2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(results[0][i], results[1][i]) << i;

  // The loss: mean softmax cross-entropy of relu(x w1 + b1) w2 + b2.
  double loss = 0;
  std::vector<double> h(kHidden), logits(kOut);
  for (int n = 0; n < kBatch; ++n) {
    for (int j = 0; j < kHidden; ++j) {
      double z = b1[j];
      for (int k = 0; k < kIn; ++k)
        z += double{x[n * kIn + k]} * w1[k * kHidden + j];
      h[j] = std::max(z, 0.0);
    }
    double top = -1e300;
    for (int o = 0; o < kOut; ++o) {
      double z = b2[o];
      for (int j = 0; j < kHidden; ++j) z += h[j] * w2[j * kOut + o];
      logits[o] = z;
      top = std::max(top, z);
    }
    double sum = 0;
    for (int o = 0; o < kOut; ++o) sum += std::exp(logits[o] - top);
    loss -= logits[labels[n]] - top - std::log(sum);
  }
  loss /= kBatch;
  const float got = FromBytes<float>(results[0][4])[0];
  EXPECT_NEAR(got, loss, 1e-5 * std::abs(loss));
}

// The transformer-block training step of tests/data (StableHLO as JAX
// prints it, and its HLO twin): the same bytes in both formats for a first
// step, and two chained steps lower the loss alike.
TEST_P(ExecutableTest, StableHloTransformerStepMatchesItsHloTwinAndLearns) {
  constexpr int kTokens = 256, kVocab = 300, kWidth = 32, kLayers = 2;
  uint64_t state = 777;
  const auto uniform = [&]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
  };
  std::vector<std::vector<float>> params;
  params.emplace_back(kVocab * kWidth);
  for (int i = 0; i < 2 * kLayers; ++i) params.emplace_back(kWidth * kWidth);
  for (auto& p : params) {
    for (float& v : p)
      v = uniform() * (p.size() == kVocab * kWidth ? 2.0f : 0.6f);
  }
  std::vector<int32_t> ids(kTokens);
  for (int i = 0; i < kTokens; ++i) ids[i] = (i * 37) % kVocab;
  std::vector<float> target(kTokens * kWidth);
  for (float& v : target) v = uniform() * 2;

  std::vector<std::vector<std::vector<uint8_t>>> first_steps;
  std::vector<float> losses;
  for (const char* file : {"tests/data/transformer_step.mlir",
                           "tests/data/transformer_step.hlo"}) {
    // Fresh executables, as in the MLP test above.
    pjrt_client::CompileOptions options;
    options.collective_timeout = absl::Seconds(19 + GetParam());
    auto executable = session_->Compile(ReadSourceFile(file), options);
    ASSERT_TRUE(executable.ok()) << file << ": " << executable.status();
    std::vector<std::vector<float>> current = params;
    for (int step = 0; step < 2; ++step) {
      std::vector<pjrt_client::Buffer> args;
      for (const auto& p : current) {
        const int64_t rows = static_cast<int64_t>(p.size()) / kWidth;
        auto b = session_->Upload(pjrt_client::DType::kF32, {rows, kWidth},
                                  pjrt_client::AsBytes(p), 0);
        ASSERT_TRUE(b.ok()) << b.status();
        args.push_back(*std::move(b));
      }
      auto i = session_->Upload(pjrt_client::DType::kS32, {kTokens},
                                pjrt_client::AsBytes(ids), 0);
      auto t = session_->Upload(pjrt_client::DType::kF32, {kTokens, kWidth},
                                pjrt_client::AsBytes(target), 0);
      ASSERT_TRUE(i.ok() && t.ok());
      args.push_back(*std::move(i));
      args.push_back(*std::move(t));
      auto read = RunAndRead(*executable, args);
      ASSERT_TRUE(read.ok()) << read.status();
      std::vector<std::vector<uint8_t>> bytes = *std::move(read);
      ASSERT_EQ(bytes.size(), current.size() + 1);
      for (size_t k = 0; k < current.size(); ++k) {
        current[k] = FromBytes<float>(bytes[k]);
      }
      losses.push_back(FromBytes<float>(bytes.back())[0]);
      if (step == 0) first_steps.push_back(std::move(bytes));
    }
  }
  ASSERT_EQ(first_steps.size(), 2);
  EXPECT_EQ(first_steps[0], first_steps[1]);
  ASSERT_EQ(losses.size(), 4);
  EXPECT_TRUE(std::isfinite(losses[0]));
  EXPECT_LT(losses[1], losses[0]);
  EXPECT_LT(losses[3], losses[2]);
  EXPECT_EQ(losses[0], losses[2]);
  EXPECT_NEAR(losses[1], losses[3], 1e-5 * losses[1]);
}

// A StableHLO program's errors point into its own text.
TEST_P(ExecutableTest, StableHloErrorsNameTheLineOfTheProgram) {
  const std::string program =
      "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
      "  %0 = \"stablehlo.einsum\"(%x, %x) {einsum_config = \"i,i->i\"}\n"
      "      : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
      "  return %0 : tensor<4xf32>\n"
      "}\n";
  auto executable = session_->Compile(program);
  EXPECT_EQ(executable.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(executable.status().message(),
                                "line 2, column 8: "
                                "stablehlo.einsum"))
      << executable.status();
  // Told it is HLO text, the daemon reads it as HLO and says so.
  pjrt_client::CompileOptions hlo;
  hlo.program_format = pjrt_client::ProgramFormat::kHlo;
  auto as_hlo = session_->Compile(program, hlo);
  EXPECT_EQ(as_hlo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(as_hlo.status().message(), "HloModule"))
      << as_hlo.status();
}

TEST_P(ExecutableTest, ATupleRootGivesOneBufferPerElement) {
  auto executable = session_->Compile(kTupleProgram);
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_TRUE(executable->result_is_tuple());
  ASSERT_EQ(executable->result_shapes().size(), 3);
  std::vector<int32_t> x = {1, 2, 3, 4, 5, 6};
  auto input = session_->Upload(pjrt_client::DType::kS32, {2, 3},
                                pjrt_client::AsBytes(x), 0);
  ASSERT_TRUE(input.ok()) << input.status();
  auto results = executable->Execute({&*input}, 0);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ(FromBytes<int32_t>(*(*results)[0].Download()),
            std::vector<int32_t>({2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(FromBytes<int32_t>(*(*results)[1].Download()),
            std::vector<int32_t>({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ((*results)[2].dims(), std::vector<int64_t>());
  EXPECT_EQ(FromBytes<int32_t>(*(*results)[2].Download()),
            std::vector<int32_t>({21}));
}

// --- replicas, donation, tuples --------------------------------------------

// x + replica-id, summed over three replicas.
constexpr char kReplicatedProgram[] = R"(HloModule replicated, replica_count=3
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[2] parameter(0)
  r = u32[] replica-id()
  rf = f32[] convert(r)
  rb = f32[2] broadcast(rf), dimensions={}
  y = f32[2] add(x, rb)
  ROOT ar = f32[2] all-reduce(y), replica_groups={}, to_apply=add
}
)";

TEST_P(ExecutableTest, ExecuteReplicatedRunsEveryReplica) {
  const pjrt_client::CompileOptions options{
      .num_replicas = 3, .num_partitions = 1, .device_assignment = {2, 0, 1}};
  auto executable = session_->Compile(kReplicatedProgram, options);
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_EQ(executable->num_replicas(), 3);
  EXPECT_EQ(executable->addressable_device_ids(), std::vector<int>({2, 0, 1}));
  std::vector<pjrt_client::Buffer> inputs;
  for (int d : executable->addressable_device_ids()) {
    inputs.push_back(UploadF32({1, 2}, d));
  }
  std::vector<std::vector<const pjrt_client::Buffer*>> arguments;
  for (const auto& b : inputs) arguments.push_back({&b});
  auto results = executable->ExecuteReplicated(arguments);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    ASSERT_EQ((*results)[r].size(), 1u);
    EXPECT_EQ((*results)[r][0].device_id(),
              executable->addressable_device_ids()[r]);
    // (1 + 0) + (1 + 1) + (1 + 2), (2 + 0) + ...
    EXPECT_EQ(FromBytes<float>(*(*results)[r][0].Download()),
              std::vector<float>({6, 9}));
  }
  auto wrong = executable->ExecuteReplicated({{&inputs[0]}});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("got 1 argument lists"),
            std::string::npos)
      << wrong.status();
}

TEST_P(ExecutableTest, ShardedExecuteCallsMeetByLaunchId) {
  auto executable = session_->Compile(kReplicatedProgram);
  ASSERT_TRUE(executable.ok()) << executable.status();
  std::vector<pjrt_client::Buffer> inputs;
  for (int d = 0; d < 3; ++d) inputs.push_back(UploadF32({0, 0}, d));
  pjrt_client::ExecuteOptions options;
  options.launch_id = 4242 + GetParam();
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<std::vector<pjrt_client::Buffer>>> results(3);
  for (int d = 0; d < 3; ++d) {
    threads.emplace_back(
        [&, d] { results[d] = executable->Execute({&inputs[d]}, d, options); });
  }
  for (auto& t : threads) t.join();
  for (int d = 0; d < 3; ++d) {
    ASSERT_TRUE(results[d].ok()) << results[d].status();
    EXPECT_EQ(FromBytes<float>(*(*results[d])[0].Download()),
              std::vector<float>({3, 3}));
  }
}

TEST_P(ExecutableTest, DonatedArgumentsAreInvalidAfterTheRun) {
  auto executable = session_->Compile(
      R"(HloModule donating, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) })");
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_EQ(executable->donated_parameters(), std::vector<int>({0}));
  pjrt_client::Buffer x = UploadF32({1, 2, 3, 4});
  auto results = executable->Execute({&x}, 0);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(FromBytes<float>(*(*results)[0].Download()),
            std::vector<float>({-1, -2, -3, -4}));
  auto gone = x.Download();
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(gone.status().message().find("donated"), std::string::npos)
      << gone.status();
}

TEST_P(ExecutableTest, TupleBuffersGoInAndComeOutWhole) {
  auto executable = session_->Compile(R"(HloModule tupled
ENTRY e {
  p = (f32[2], f32[2]) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  b = f32[2] get-tuple-element(p), index=1
  s = f32[2] add(a, b)
  ROOT t = (f32[2], f32[2]) tuple(s, b)
})");
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_TRUE(executable->info().parameter_is_tuple);
  EXPECT_EQ(executable->parameter_shapes().size(), 2);
  std::vector<pjrt_client::Buffer> elements;
  elements.push_back(UploadF32({1, 2}));
  elements.push_back(UploadF32({10, 20}));
  const int64_t buffers_before = Stats().buffer_count;
  auto tuple = session_->MakeTuple(std::move(elements));
  ASSERT_TRUE(tuple.ok()) << tuple.status();
  EXPECT_TRUE(tuple->is_tuple());
  EXPECT_EQ(tuple->tuple_size(), 2);
  pjrt_client::ExecuteOptions options;
  options.arguments_are_tupled = true;
  options.keep_tuple_result = true;
  auto results = executable->Execute({&*tuple}, 0, options);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  const pjrt_client::Buffer& whole = (*results)[0];
  ASSERT_TRUE(whole.is_tuple());
  EXPECT_EQ(FromBytes<float>(*whole.Element(0).Download()),
            std::vector<float>({11, 22}));
  EXPECT_EQ(FromBytes<float>(*whole.Element(1).Download()),
            std::vector<float>({10, 20}));
  auto direct = whole.Download();
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(direct.status().message().find("download its elements"),
            std::string::npos)
      << direct.status();
  // A tuple and its elements are registered; deleting the tuples frees all.
  EXPECT_EQ(Stats().buffer_count, buffers_before + 1 + 3);
  tuple->Delete().IgnoreError();
  results->clear();  // released with the next call, or flushed
  session_->FlushReleases();
  EXPECT_EQ(Stats().buffer_count, buffers_before - 2);
}

TEST_P(ExecutableTest, RunsChainWithoutWaitingForEachOther) {
  // y = y + y, 20 times, each run taking the previous run's result before it
  // is ready: only the final download waits.
  auto executable = session_->Compile(AddProgram(UniqueName("chain")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  pjrt_client::Buffer y = UploadF32({1, -1, 0.5, 3});
  for (int i = 0; i < 20; ++i) {
    auto next = executable->Execute({&y, &y}, 0);
    ASSERT_TRUE(next.ok()) << next.status();
    y = std::move((*next)[0]);
  }
  auto bytes = y.Download();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const float scale = 1 << 20;
  EXPECT_EQ(FromBytes<float>(*bytes),
            std::vector<float>({scale, -scale, scale / 2, 3 * scale}));
}

TEST_P(ExecutableTest, DroppedResultsRideOnTheNextExecuteOrAFlush) {
  auto executable = session_->Compile(AddProgram(UniqueName("drops")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  const int64_t before = Stats().buffer_count;
  pjrt_client::Buffer y = UploadF32({1, 2, 3, 4});
  for (int i = 0; i < 50; ++i) {
    auto next = executable->Execute({&y, &y}, 0);
    ASSERT_TRUE(next.ok()) << next.status();
    y = std::move((*next)[0]);  // drops the previous step's result
  }
  // Each Execute carried the release of the result dropped before it: the
  // session holds y and at most the one dropped after the last Execute.
  EXPECT_LE(Stats().buffer_count, before + 2);
  y = pjrt_client::Buffer();
  // With no further Execute, the session's flusher sends it.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Stats().buffer_count != before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Stats().buffer_count, before);
}

TEST_P(ExecutableTest, FetchedResultsAreTheBytesADownloadReads) {
  auto executable = session_->Compile(AddProgram(UniqueName("fetch")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  pjrt_client::Buffer a = UploadF32({1.5f, -0.0f, 1e30f, 7});
  pjrt_client::ExecuteOptions options;
  options.fetch_results = true;
  auto fetched = executable->Execute({&a, &a}, 0, options);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->size(), 1u);
  EXPECT_TRUE((*fetched)[0].info().ready);
  ASSERT_TRUE((*fetched)[0].info().data.has_value());
  auto plain = executable->Execute({&a, &a}, 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto downloaded = (*plain)[0].Download();
  ASSERT_TRUE(downloaded.ok()) << downloaded.status();
  const std::string& inline_bytes = *(*fetched)[0].info().data;
  EXPECT_EQ(std::vector<uint8_t>(inline_bytes.begin(), inline_bytes.end()),
            *downloaded);
  EXPECT_EQ(FromBytes<float>(*downloaded),
            std::vector<float>({3.0f, -0.0f, 2e30f, 14}));
}

TEST_P(ExecutableTest, BadArgumentsAreInvalidArgumentNamingTheArgument) {
  auto executable = session_->Compile(AddProgram(UniqueName("bad_args")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  pjrt_client::Buffer a = UploadF32({1, 2, 3, 4});
  pjrt_client::Buffer short_one = UploadF32({1, 2, 3});
  pjrt_client::Buffer elsewhere = UploadF32({1, 2, 3, 4}, 2);
  std::vector<int32_t> ints = {1, 2, 3, 4};
  auto wrong_dtype = session_->Upload(pjrt_client::DType::kS32, {4},
                                      pjrt_client::AsBytes(ints), 0);
  ASSERT_TRUE(wrong_dtype.ok());

  struct Case {
    std::vector<const pjrt_client::Buffer*> args;
    std::vector<std::string> expected;
  };
  const Case cases[] = {
      {{&a}, {"2", "1"}},          // arity: takes 2, got 1
      {{&a, &a, &a}, {"2", "3"}},  // arity: takes 2, got 3
      {{&a, &short_one}, {"argument 1", "f32[3]", "f32[4]"}},
      {{&*wrong_dtype, &a}, {"argument 0", "s32", "f32"}},
      {{&a, &elsewhere}, {"argument 1", "host:2", "host:0"}},
  };
  for (const Case& c : cases) {
    auto results = executable->Execute(c.args, 0);
    ASSERT_FALSE(results.ok());
    EXPECT_EQ(results.status().code(), absl::StatusCode::kInvalidArgument)
        << results.status();
    for (const std::string& word : c.expected) {
      EXPECT_NE(results.status().message().find(word), std::string::npos)
          << "'" << word << "' missing from: " << results.status();
    }
  }
  auto no_device = executable->Execute({&a, &a}, 7);
  ASSERT_FALSE(no_device.ok());
  EXPECT_EQ(no_device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_device.status().message().find("device 7"), std::string::npos)
      << no_device.status();
  ExpectHealthy();
}

TEST_P(ExecutableTest, UnknownAndForeignHandlesAreIndistinguishable) {
  auto executable = session_->Compile(AddProgram(UniqueName("foreign")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  pjrt_client::Buffer a = UploadF32({1, 2, 3, 4});

  auto run = [&](uint64_t session_id, uint64_t executable_handle,
                 std::vector<uint64_t> args) {
    v1::ExecuteRequest request;
    request.set_session_id(session_id);
    request.set_executable_handle(executable_handle);
    for (uint64_t h : args) request.add_argument_handles(h);
    v1::ExecuteResponse response;
    grpc::ClientContext context;
    return v1::Executables::NewStub(client_->channel())
        ->Execute(&context, request, &response);
  };
  auto other = OpenSession("other");
  grpc::Status foreign =
      run(other->id(), executable->handle(), {});  // another session's
  grpc::Status unknown = run(session_->id(), 0x1234, {a.handle(), a.handle()});
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(absl::StrReplaceAll(
                foreign.error_message(),
                {{absl::StrFormat("%#x", executable->handle()), "H"}}),
            absl::StrReplaceAll(unknown.error_message(), {{"0x1234", "H"}}));

  // An argument of another session is NOT_FOUND too, naming the argument.
  pjrt_client::Buffer theirs = [&] {
    std::vector<float> v = {1, 2, 3, 4};
    return *other->Upload(pjrt_client::DType::kF32, {4},
                          pjrt_client::AsBytes(v), 0);
  }();
  grpc::Status foreign_arg =
      run(session_->id(), executable->handle(), {a.handle(), theirs.handle()});
  EXPECT_EQ(foreign_arg.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(foreign_arg.error_message().find("argument 1"), std::string::npos)
      << foreign_arg.error_message();

  // Deleting another session's executable fails the same way and leaves it.
  v1::DeleteExecutableRequest request;
  request.set_session_id(other->id());
  request.set_executable_handle(executable->handle());
  v1::DeleteExecutableResponse response;
  grpc::ClientContext context;
  EXPECT_EQ(v1::Executables::NewStub(client_->channel())
                ->DeleteExecutable(&context, request, &response)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(executable->Execute({&a, &a}, 0).ok());
}

TEST_P(ExecutableTest, DeletedExecutableIsNotFound) {
  auto executable = session_->Compile(AddProgram(UniqueName("deleted")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  pjrt_client::Buffer a = UploadF32({1, 2, 3, 4});
  uint64_t handle = executable->handle();
  const int64_t before = Stats().executable_count;
  ASSERT_TRUE(executable->Delete().ok());
  EXPECT_EQ(Stats().executable_count, before - 1);
  v1::ExecuteRequest request;
  request.set_session_id(session_->id());
  request.set_executable_handle(handle);
  request.add_argument_handles(a.handle());
  request.add_argument_handles(a.handle());
  v1::ExecuteResponse response;
  grpc::ClientContext context;
  grpc::Status status = v1::Executables::NewStub(client_->channel())
                            ->Execute(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("not an executable of this session"),
            std::string::npos)
      << status.error_message();
}

TEST_P(ExecutableTest, ClosingTheSessionDropsItsExecutablesAndResults) {
  const int64_t executables_before = Stats().executable_count;
  const int64_t buffers_before = Stats().buffer_count;
  {
    auto session = OpenSession("closing");
    auto executable = session->Compile(AddProgram(UniqueName("closing")));
    ASSERT_TRUE(executable.ok()) << executable.status();
    std::vector<float> v = {1, 2, 3, 4};
    auto a = session->Upload(pjrt_client::DType::kF32, {4},
                             pjrt_client::AsBytes(v), 0);
    ASSERT_TRUE(a.ok());
    auto results = executable->Execute({&*a, &*a}, 0);
    ASSERT_TRUE(results.ok()) << results.status();
    EXPECT_EQ(Stats().executable_count, executables_before + 1);
    EXPECT_EQ(Stats().buffer_count, buffers_before + 2);
    // Keep the handles alive in the client: only closing frees them.
    executable->Release();
    a->Release();
    for (auto& r : *results) r.Release();
  }
  EXPECT_EQ(Stats().executable_count, executables_before);
  EXPECT_EQ(Stats().buffer_count, buffers_before);
}

// --- pjrtctl
// -------------------------------------------------------------------

TEST_P(ExecutableTest, PjrtctlCompilePrintsTheSignatureInBothModes) {
  std::string path = WriteFile(UniqueName("cli_add") + ".hlo",
                               AddProgram(UniqueName("cli_add")));
  CommandResult table = Pjrtctl({"compile", path});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(UniqueName("cli_add")), std::string::npos);
  EXPECT_NE(table.out.find("parameter"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("f32[4]"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cache hit:    no"), std::string::npos) << table.out;

  CommandResult doc = Pjrtctl({"compile", path, "--json"});
  ASSERT_EQ(doc.exit_code, 0) << doc.err;
  json j = json::parse(doc.out);
  EXPECT_EQ(j["name"], UniqueName("cli_add"));
  EXPECT_EQ(j["parameters"].size(), 2u);
  EXPECT_EQ(j["parameters"][0]["shape"], "f32[4]");
  EXPECT_EQ(j["results"][0]["dims"], json::array({4}));
  EXPECT_EQ(j["cache_hit"], true);  // the table run compiled it
  EXPECT_EQ(j["fingerprint"].get<std::string>().size(), 64u);
}

TEST_P(ExecutableTest, PjrtctlStatsAndSessionsCountExecutables) {
  auto executable = session_->Compile(AddProgram(UniqueName("counted")));
  ASSERT_TRUE(executable.ok()) << executable.status();
  CommandResult stats = Pjrtctl({"stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("executables: "), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("compile cache: "), std::string::npos) << stats.out;
  CommandResult doc = Pjrtctl({"stats", "--json"});
  ASSERT_EQ(doc.exit_code, 0) << doc.err;
  json j = json::parse(doc.out);
  EXPECT_GE(j["executable_count"].get<int64_t>(), 1);
  EXPECT_EQ(j["compile_cache"]["capacity"], 64);
  EXPECT_GE(j["compile_cache"]["compiles"].get<int64_t>(), 1);

  CommandResult sessions = Pjrtctl({"sessions", "--json"});
  ASSERT_EQ(sessions.exit_code, 0) << sessions.err;
  bool found = false;
  json listing = json::parse(sessions.out);
  for (const json& s : listing["sessions"]) {
    if (s["public_id"] == session_->public_id()) {
      EXPECT_EQ(s["executable_count"], 1);
      found = true;
    }
  }
  EXPECT_TRUE(found) << sessions.out;
  CommandResult table = Pjrtctl({"sessions"});
  EXPECT_NE(table.out.find("EXECUTABLES"), std::string::npos) << table.out;
}

TEST_P(ExecutableTest, PjrtctlCompileErrorExitsOneWithLineAndCaret) {
  std::string path =
      WriteFile("broken.hlo",
                "HloModule broken\n\nENTRY main {\n  p = f32[2] parameter(0)\n"
                "  ROOT r = f32[3] add(p, p)\n}\n");
  CommandResult table = Pjrtctl({"compile", path});
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_NE(table.err.find("INVALID_ARGUMENT"), std::string::npos) << table.err;
  EXPECT_NE(table.err.find("line 5"), std::string::npos) << table.err;
  EXPECT_NE(table.err.find("^"), std::string::npos) << table.err;

  CommandResult doc = Pjrtctl({"--json", "compile", path});
  EXPECT_EQ(doc.exit_code, 1);
  json j = json::parse(doc.out);
  EXPECT_EQ(j["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("line 5"),
            std::string::npos);

  CommandResult missing = Pjrtctl({"compile", dir_->path() + "/nope.hlo"});
  EXPECT_EQ(missing.exit_code, 2);
}

TEST_P(ExecutableTest, PjrtctlRunWritesOneNpyPerResultInBothModes) {
  std::string hlo = WriteFile("tuple.hlo", kTupleProgram);
  cli::HostArray x;
  x.dtype = pjrt_client::DType::kS32;
  x.dims = {2, 3};
  std::vector<int32_t> values = {1, 2, 3, 4, 5, 6};
  x.data.assign(reinterpret_cast<uint8_t*>(values.data()),
                reinterpret_cast<uint8_t*>(values.data()) + 24);
  std::string input = dir_->path() + "/x.npy";
  ASSERT_TRUE(cli::WriteNpy(input, x).ok());
  std::string out_dir = dir_->path() + "/" + UniqueName("run_out");

  CommandResult table = Pjrtctl(
      {"run", hlo, "--input", input, "--output-dir", out_dir, "--repeat", "3"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("runs:         3: min"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("out2.npy"), std::string::npos) << table.out;
  auto doubled = cli::ReadNpy(out_dir + "/out0.npy");
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  EXPECT_EQ(FromBytes<int32_t>(doubled->data),
            std::vector<int32_t>({2, 4, 6, 8, 10, 12}));
  auto total = cli::ReadNpy(out_dir + "/out2.npy");
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_TRUE(total->dims.empty());
  EXPECT_EQ(FromBytes<int32_t>(total->data), std::vector<int32_t>({21}));

  CommandResult doc = Pjrtctl({"run", hlo, "--input", input, "--json",
                               "--device", "2", "--repeat", "4"});
  ASSERT_EQ(doc.exit_code, 0) << doc.err;
  json j = json::parse(doc.out);
  EXPECT_EQ(j["name"], "tuple_results");
  EXPECT_EQ(j["device"], 2);
  EXPECT_EQ(j["run_seconds"]["all"].size(), 4u);
  EXPECT_LE(j["run_seconds"]["min"].get<double>(),
            j["run_seconds"]["median"].get<double>());
  EXPECT_LE(j["run_seconds"]["median"].get<double>(),
            j["run_seconds"]["max"].get<double>());
  ASSERT_EQ(j["outputs"].size(), 3u);
  EXPECT_EQ(j["outputs"][2]["shape"], "s32[]");
  EXPECT_EQ(j["outputs"][2]["file"], nullptr);
}

TEST_P(ExecutableTest, PjrtctlRunRejectsMismatchedInputsAsUsageErrors) {
  std::string hlo = WriteFile(UniqueName("mismatch") + ".hlo",
                              AddProgram(UniqueName("mismatch")));
  cli::HostArray three;
  three.dtype = pjrt_client::DType::kF32;
  three.dims = {3};
  three.data.resize(12);
  std::string short_input = dir_->path() + "/three.npy";
  ASSERT_TRUE(cli::WriteNpy(short_input, three).ok());
  cli::HostArray four = three;
  four.dims = {4};
  four.data.resize(16);
  std::string good_input = dir_->path() + "/four.npy";
  ASSERT_TRUE(cli::WriteNpy(good_input, four).ok());
  cli::HostArray doubles = four;
  doubles.dtype = pjrt_client::DType::kF64;
  doubles.data.resize(32);
  std::string f64_input = dir_->path() + "/four_f64.npy";
  ASSERT_TRUE(cli::WriteNpy(f64_input, doubles).ok());

  CommandResult count = Pjrtctl({"run", hlo, "--input", good_input});
  EXPECT_EQ(count.exit_code, 2);
  EXPECT_NE(count.err.find("takes 2 parameter(s) (f32[4], f32[4]); got 1"),
            std::string::npos)
      << count.err;

  CommandResult shape =
      Pjrtctl({"run", hlo, "--input", good_input, "--input", short_input});
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_NE(shape.err.find("input 1 (" + short_input +
                           ") is f32[3]; "
                           "parameter 1 of " +
                           UniqueName("mismatch") + " is f32[4]"),
            std::string::npos)
      << shape.err;

  CommandResult dtype = Pjrtctl(
      {"--json", "run", hlo, "--input", f64_input, "--input", good_input});
  EXPECT_EQ(dtype.exit_code, 2);
  json j = json::parse(dtype.out);
  EXPECT_EQ(j["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_NE(j["error"]["message"].get<std::string>().find(
                "the file holds f64, the parameter is f32"),
            std::string::npos);

  CommandResult help = Pjrtctl({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Example: pjrtctl run"), std::string::npos);
}

}  // namespace
}  // namespace pjrt::testing
