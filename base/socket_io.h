// Whole-buffer I/O on blocking sockets, and the length prefix of framed
// messages (execute lanes: 4 bytes, little-endian, then the message), for
// the daemon and the C++ client alike.
#ifndef PJRT_BASE_SOCKET_IO_H_
#define PJRT_BASE_SOCKET_IO_H_

#include <cstddef>
#include <cstdint>

namespace pjrt {

// Sends all `size` bytes, retrying after signals and never raising SIGPIPE.
// False when the peer went away or the socket failed first: errno then says
// why (0 when the connection was closed) and `*done` (if given) how many
// bytes went.
bool SendAll(int fd, const void* data, size_t size, size_t* done = nullptr);
// Receives exactly `size` bytes, as SendAll sends them; false (errno, and
// `*done`) when the stream ends or fails first, or a receive timeout set on
// the socket passes.
bool ReceiveAll(int fd, void* data, size_t size, size_t* done = nullptr);

// Sends `size` bytes with the file descriptor `passed` attached
// (SCM_RIGHTS) in one sendmsg on the unix socket `fd`, never raising
// SIGPIPE: how a memfd reaches the daemon's region socket. False (errno)
// when the send fails.
bool SendWithDescriptor(int fd, const void* data, size_t size, int passed);

inline constexpr size_t kFramePrefixBytes = 4;
void EncodeFrameLength(uint32_t length,
                       unsigned char prefix[kFramePrefixBytes]);
uint32_t DecodeFrameLength(const unsigned char prefix[kFramePrefixBytes]);

}  // namespace pjrt

#endif  // PJRT_BASE_SOCKET_IO_H_
