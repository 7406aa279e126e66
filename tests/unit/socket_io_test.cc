// base/socket_io.h on a socket pair: whole buffers cross, a closed peer is
// reported with how far the transfer got, a file descriptor crosses with
// its message, and frame lengths are little-endian.
#include "base/socket_io.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <numeric>
#include <string>
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

TEST_F(SocketIoTest, ADescriptorCrossesWithItsMessage) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_TRUE(SendWithDescriptor(fds_[0], "reg", 3, pipe_fds[1]));
  close(pipe_fds[1]);

  char data[8] = {};
  iovec iov{.iov_base = data, .iov_len = sizeof(data)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ASSERT_EQ(recvmsg(fds_[1], &message, 0), 3);
  EXPECT_EQ(std::string(data, 3), "reg");
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->cmsg_type, SCM_RIGHTS);
  int received;
  std::memcpy(&received, CMSG_DATA(c), sizeof(int));
  // The received descriptor is the pipe's write end: what goes in comes out.
  ASSERT_EQ(write(received, "x", 1), 1);
  close(received);
  char byte = 0;
  EXPECT_EQ(read(pipe_fds[0], &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
  close(pipe_fds[0]);
}

TEST_F(SocketIoTest, ADescriptorSendToAClosedPeerFails) {
  CloseEnd(1);
  EXPECT_FALSE(SendWithDescriptor(fds_[0], "reg", 3, fds_[0]));
  EXPECT_EQ(errno, EPIPE);
}

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
