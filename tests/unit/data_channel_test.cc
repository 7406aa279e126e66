#include "daemon/data_channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "base/cancellation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

using ::testing::HasSubstr;

// A channel over one end of a socket pair; the test holds the other end.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    channel = std::make_shared<DataChannel>(fds[0], live);
    peer = fds[1];
  }
  ~Pair() {
    if (peer >= 0) close(peer);
  }
  std::shared_ptr<std::atomic<int64_t>> live =
      std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<DataChannel> channel;
  int peer = -1;
};

std::string ReadAll(int fd, size_t size) {
  std::string out(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, out.data() + got, size - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

TEST(DataChannel, SendsAndReceivesMoreThanTheSocketBuffers) {
  Pair pair;
  std::string data(8 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  std::string got;
  std::thread reader([&] { got = ReadAll(pair.peer, data.size()); });
  ASSERT_TRUE(
      pair.channel->Send(data.data(), data.size(), nullptr, "test").ok());
  reader.join();
  EXPECT_EQ(got, data);

  std::thread writer([&] {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = write(pair.peer, data.data() + sent, data.size() - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  });
  std::string back(data.size(), '\0');
  ASSERT_TRUE(
      pair.channel->Receive(back.data(), back.size(), nullptr, "test").ok());
  writer.join();
  EXPECT_EQ(back, data);
  EXPECT_FALSE(pair.channel->ended());
}

TEST(DataChannel, APeerThatClosesEndsTheTransferAndTheChannel) {
  Pair pair;
  ASSERT_EQ(write(pair.peer, "abc", 3), 3);
  close(pair.peer);
  pair.peer = -1;
  char buffer[10];
  absl::Status status = pair.channel->Receive(buffer, sizeof(buffer), nullptr,
                                              "upload of u8[10]");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("upload of u8[10]"));
  EXPECT_THAT(status.message(), HasSubstr("after 3 of 10 bytes"));
  EXPECT_TRUE(pair.channel->ended());
  EXPECT_EQ(pair.channel->Acquire(0x42).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(DataChannel, ACancelledTransferStopsWaiting) {
  Pair pair;
  auto cancellation = std::make_shared<Cancellation>();
  std::thread cancel([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancellation->Cancel(absl::CancelledError("the call was cancelled"));
  });
  char buffer[16];
  absl::Time start = absl::Now();
  absl::Status status =
      pair.channel->Receive(buffer, sizeof(buffer), cancellation.get(), "x");
  cancel.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(pair.channel->ended());
}

TEST(DataChannel, OneTransferAtATime) {
  Pair pair;
  ASSERT_TRUE(pair.channel->Acquire(0x42).ok());
  absl::Status busy = pair.channel->Acquire(0x42);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(busy.message(), HasSubstr("0x42"));
  EXPECT_THAT(busy.message(), HasSubstr("busy"));
  pair.channel->Release(/*ok=*/true);
  EXPECT_TRUE(pair.channel->Acquire(0x42).ok());
  pair.channel->Release(/*ok=*/false);  // a failed transfer ends it
  EXPECT_TRUE(pair.channel->ended());
}

TEST(DataChannel, AnIdleChannelIsAbandonedOnlyOnceItsPeerClosed) {
  {
    Pair pair;
    EXPECT_FALSE(pair.channel->EndIfAbandoned());
    close(pair.peer);
    pair.peer = -1;
    EXPECT_TRUE(pair.channel->EndIfAbandoned());
  }
  {
    // Bytes waiting are an upload whose call has not taken the channel
    // yet: the channel stays, and the upload gets them.
    Pair pair;
    ASSERT_EQ(write(pair.peer, "xy", 2), 2);
    EXPECT_FALSE(pair.channel->EndIfAbandoned());
    ASSERT_TRUE(pair.channel->Acquire(1).ok());
    char got[2];
    ASSERT_TRUE(pair.channel->Receive(got, 2, nullptr, "upload").ok());
    EXPECT_EQ(std::string(got, 2), "xy");
  }
  {
    // A channel in a transfer is not looked at.
    Pair pair;
    ASSERT_TRUE(pair.channel->Acquire(1).ok());
    close(pair.peer);
    pair.peer = -1;
    EXPECT_FALSE(pair.channel->EndIfAbandoned());
  }
}

TEST(DataChannel, CountsItselfWhileItLives) {
  auto live = std::make_shared<std::atomic<int64_t>>(0);
  {
    Pair pair;
    live = pair.live;
    EXPECT_EQ(live->load(), 1);
  }
  EXPECT_EQ(live->load(), 0);
}

}  // namespace
}  // namespace pjrt::daemon
