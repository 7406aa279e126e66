// The tenants file, tokens, and a tenant's quotas.
#include "daemon/tenants.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/token.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

const std::string kDigest(64, 'a');

TEST(ParseTenants, ReadsRolesCredentialsWeightsAndQuotas) {
  auto tenants = ParseTenants(R"(
[[tenant]]
name = "alice"
role = "user"
token_sha256 = "salt$)" + kDigest +
                                  R"("
weight = 3
[tenant.quota]
device_memory = "4GiB"
sessions = 16
queued_executions = 256

[[tenant]]
name = "ops"
role = "admin"
uid = 1000
gid = 50
cert_subject = "CN=ops"
)",
                              "tenants.toml");
  ASSERT_TRUE(tenants.ok()) << tenants.status();
  ASSERT_EQ(tenants->size(), 2u);
  const TenantConfig& alice = (*tenants)[0];
  EXPECT_EQ(alice.role, TenantRole::kUser);
  EXPECT_EQ(alice.weight, 3);
  EXPECT_EQ(alice.quota.device_memory, int64_t{4} << 30);
  EXPECT_EQ(alice.quota.sessions, 16);
  EXPECT_EQ(alice.quota.queued_executions, 256);
  EXPECT_EQ(alice.quota.executables, 0);  // no limit
  const TenantConfig& ops = (*tenants)[1];
  EXPECT_EQ(ops.role, TenantRole::kAdmin);
  EXPECT_EQ(ops.uid, 1000u);
  EXPECT_EQ(ops.gid, 50u);
  EXPECT_EQ(ops.cert_subject, "CN=ops");
}

TEST(ParseTenants, ErrorsNameTheTenantAndTheKey) {
  const auto error = [](const std::string& text) {
    auto parsed = ParseTenants(text, "t.toml");
    EXPECT_FALSE(parsed.ok());
    return std::string(parsed.status().message());
  };
  EXPECT_NE(error("[[tenant]]\nname = \"a\"\nuid = 1\ncolour = 2\n")
                .find("tenant 'a': unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(error("[[tenant]]\nname = \"a\"\n").find("has no credential"),
            std::string::npos);
  EXPECT_NE(error("[[tenant]]\nname = \"a\"\ntoken_sha256 = \"xyz\"\n")
                .find("key 'token_sha256' must be 64 lowercase hex"),
            std::string::npos);
  EXPECT_NE(error("[[tenant]]\nname = \"a\"\nuid = 1\n"
                  "[[tenant]]\nname = \"a\"\nuid = 2\n")
                .find("defined twice"),
            std::string::npos);
  EXPECT_NE(error("[[tenant]]\nname = \"a\"\nuid = 1\n"
                  "[[tenant]]\nname = \"b\"\nuid = 1\n")
                .find("uid or gid of another tenant"),
            std::string::npos);
  EXPECT_NE(error("[[tenant]]\nname = \"a\"\nuid = 1\nrole = \"root\"\n")
                .find("'role' must be \"user\" or \"admin\""),
            std::string::npos);
  EXPECT_NE(error("[[tenant]]\nname = \"a\"\nuid = 1\n[tenant.quota]\n"
                  "sessions = -1\n")
                .find("quota.sessions"),
            std::string::npos);
  EXPECT_NE(error("").find("defines no tenant"), std::string::npos);
}

TEST(ParseTenants, AFloatIsNoId) {
  // "gid = 42e73" once reached a float-to-integer conversion with undefined
  // behaviour (found by config_fuzz).
  for (const char* id : {"gid = 42e73", "uid = 1000.5", "weight = 2.0"}) {
    auto tenants =
        ParseTenants(absl::StrCat("[[tenant]]\nname = \"t\"\ntoken_sha256 = \"",
                                  std::string(64, 'a'), "\"\n", id, "\n"),
                     "tenants.toml");
    EXPECT_EQ(tenants.status().code(), absl::StatusCode::kInvalidArgument)
        << id;
  }
}

TEST(TenantAccount, ALocalProcessActsForAUidTenantOnlyWithThatUid) {
  TenantConfig by_uid{.name = "u", .uid = 1000, .gid = 7};
  EXPECT_TRUE(TenantAccount(by_uid, 1).AdmitsLocalProcess(1000, 1));
  EXPECT_FALSE(TenantAccount(by_uid, 1).AdmitsLocalProcess(1001, 7));
  TenantConfig by_gid{.name = "g", .gid = 7};
  EXPECT_TRUE(TenantAccount(by_gid, 1).AdmitsLocalProcess(1, 7));
  EXPECT_FALSE(TenantAccount(by_gid, 1).AdmitsLocalProcess(1, 8));
  TenantConfig by_token{.name = "t", .token_sha256 = "x"};
  EXPECT_TRUE(TenantAccount(by_token, 1).AdmitsLocalProcess(1, 8));
}

TEST(Tokens, MatchOnlyTheirOwnSaltedHash) {
  NewToken a = MakeToken(), b = MakeToken();
  EXPECT_EQ(a.token.size(), 64u);
  EXPECT_NE(a.token, b.token);
  EXPECT_TRUE(TokenMatches(a.token, a.token_sha256));
  EXPECT_FALSE(TokenMatches(b.token, a.token_sha256));
  EXPECT_FALSE(TokenMatches(a.token + "x", a.token_sha256));
  // An unsalted hash works too.
  EXPECT_TRUE(TokenMatches("secret", Sha256Hex("secret")));
}

TEST(TenantAccount, QuotasRefuseNamingTheLimitAndGiveBack) {
  TenantConfig config;
  config.name = "alice";
  config.quota.device_memory = 1000;
  config.quota.buffers = 3;
  config.quota.sessions = 1;
  config.quota.queued_executions = 1;
  TenantAccount account(config, /*device_count=*/2);
  ASSERT_TRUE(account.TakeBuffers(1, 0, 600).ok());
  absl::Status refused = account.TakeBuffers(1, 0, 600);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("quota.device_memory = 1000"),
            std::string::npos);
  EXPECT_NE(refused.message().find("holds 600 bytes"), std::string::npos);
  // Per device, and a refusal counts nothing.
  EXPECT_TRUE(account.TakeBuffers(1, 1, 600).ok());
  EXPECT_EQ(account.buffers(), 2);
  EXPECT_EQ(account.device_memory(0), 600);
  account.GiveBuffers(1, 0, 600);
  EXPECT_TRUE(account.TakeBuffers(1, 0, 1000).ok());
  EXPECT_TRUE(account.TakeBuffers(1, 1, 0).ok());  // the third buffer
  absl::Status fourth = account.TakeBuffers(1, 1, 0);
  EXPECT_EQ(fourth.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(fourth.message().find("quota.buffers = 3"), std::string::npos);
  ASSERT_TRUE(account.TakeSession().ok());
  EXPECT_EQ(account.TakeSession().code(), absl::StatusCode::kResourceExhausted);
  account.GiveSession();
  EXPECT_TRUE(account.TakeSession().ok());
  ASSERT_TRUE(account.TakeQueuedExecution(1).ok());
  EXPECT_EQ(account.TakeQueuedExecution(1).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(account.TakeQueuedExecution(0).ok());
  account.GiveQueuedExecution(1);
  EXPECT_TRUE(account.TakeQueuedExecution(1).ok());
}

}  // namespace
}  // namespace pjrt::daemon
