#include "base/socket_io.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace pjrt {

bool SendAll(int fd, const void* data, size_t size, size_t* done) {
  const char* bytes = static_cast<const char*>(data);
  size_t sent = 0;
  bool ok = true;
  while (sent < size) {
    ssize_t n = send(fd, bytes + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      ok = false;
      break;
    }
    sent += static_cast<size_t>(n);
  }
  if (done != nullptr) *done = sent;
  return ok;
}

bool ReceiveAll(int fd, void* data, size_t size, size_t* done) {
  char* bytes = static_cast<char*>(data);
  size_t received = 0;
  bool ok = true;
  while (received < size) {
    ssize_t n = recv(fd, bytes + received, size - received, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      ok = false;
      break;
    }
    received += static_cast<size_t>(n);
  }
  if (done != nullptr) *done = received;
  return ok;
}

bool SendWithDescriptor(int fd, const void* data, size_t size, int passed) {
  iovec iov{.iov_base = const_cast<void*>(data), .iov_len = size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &passed, sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(fd, &message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n >= 0;
}

void EncodeFrameLength(uint32_t length,
                       unsigned char prefix[kFramePrefixBytes]) {
  for (size_t i = 0; i < kFramePrefixBytes; ++i) {
    prefix[i] = static_cast<unsigned char>((length >> (8 * i)) & 0xff);
  }
}

uint32_t DecodeFrameLength(const unsigned char prefix[kFramePrefixBytes]) {
  return uint32_t{prefix[0]} | (uint32_t{prefix[1]} << 8) |
         (uint32_t{prefix[2]} << 16) | (uint32_t{prefix[3]} << 24);
}

}  // namespace pjrt
