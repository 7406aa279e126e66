// base/socket_io.h on a socket pair: whole buffers cross, a closed peer is
// reported with how far the transfer got, and frame lengths are
// little-endian.
#include "base/socket_io.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <numeric>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pjrt {
namespace {

class SocketIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
  }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  void CloseEnd(int i) {
    close(fds_[i]);
    fds_[i] = -1;
  }
  int fds_[2] = {-1, -1};
};

TEST_F(SocketIoTest, AWholeBufferLargerThanTheSocketBufferCrosses) {
  std::vector<unsigned char> sent(8 << 20);
  std::iota(sent.begin(), sent.end(), 0);
  std::vector<unsigned char> received(sent.size());
  bool received_ok = false;
  std::thread reader([&] {
    received_ok = ReceiveAll(fds_[1], received.data(), received.size());
  });
  size_t done = 0;
  EXPECT_TRUE(SendAll(fds_[0], sent.data(), sent.size(), &done));
  reader.join();
  EXPECT_EQ(done, sent.size());
  EXPECT_TRUE(received_ok);
  EXPECT_EQ(received, sent);
}

TEST_F(SocketIoTest, AStreamThatEndsEarlySaysHowFarItGot) {
  const char bytes[3] = {1, 2, 3};
  ASSERT_TRUE(SendAll(fds_[0], bytes, sizeof(bytes)));
  CloseEnd(0);
  char out[8];
  size_t done = 99;
  EXPECT_FALSE(ReceiveAll(fds_[1], out, sizeof(out), &done));
  EXPECT_EQ(errno, 0);  // closed, not failed
  EXPECT_EQ(done, 3u);
}

TEST_F(SocketIoTest, SendingToAClosedPeerFailsWithoutSigpipe) {
  CloseEnd(1);
  std::vector<char> bytes(1 << 20, 'x');
  size_t done = 99;
  EXPECT_FALSE(SendAll(fds_[0], bytes.data(), bytes.size(), &done));
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(done, 0u);
}

TEST(FrameLength, IsFourBytesLittleEndian) {
  unsigned char prefix[kFramePrefixBytes];
  EncodeFrameLength(0x04030201, prefix);
  EXPECT_EQ(prefix[0], 1);
  EXPECT_EQ(prefix[1], 2);
  EXPECT_EQ(prefix[2], 3);
  EXPECT_EQ(prefix[3], 4);
  EXPECT_EQ(DecodeFrameLength(prefix), 0x04030201u);
  EncodeFrameLength(0xffffffffu, prefix);
  EXPECT_EQ(DecodeFrameLength(prefix), 0xffffffffu);
}

}  // namespace
}  // namespace pjrt
