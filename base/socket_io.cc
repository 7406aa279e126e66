#include "base/socket_io.h"

#include <sys/socket.h>

#include <cerrno>

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
