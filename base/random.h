// Unguessable 64-bit values for session ids and handles.
//
// Thread-safe. Values come from the kernel's CSPRNG (getrandom), so a client
// cannot predict another session's ids from its own.
#ifndef PJRT_BASE_RANDOM_H_
#define PJRT_BASE_RANDOM_H_

#include <cstdint>

namespace pjrt {

// Returns a uniformly random non-zero 64-bit value.
uint64_t SecureRandomId();

}  // namespace pjrt

#endif  // PJRT_BASE_RANDOM_H_
