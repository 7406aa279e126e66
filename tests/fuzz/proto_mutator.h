// A structure-aware mutation of a protobuf message through reflection, for
// fuzz targets whose input is a message: one field somewhere in the message
// takes a new value (a boundary number, an enum value, bytes mutated by
// libFuzzer), an element is added to or removed from a repeated field, or a
// oneof switches case. The result is always a well-formed message.
#ifndef PJRT_TESTS_FUZZ_PROTO_MUTATOR_H_
#define PJRT_TESTS_FUZZ_PROTO_MUTATOR_H_

#include <cstddef>
#include <random>

#include "google/protobuf/message.h"

namespace pjrt::fuzz {

// Strings and bytes grow to at most this many bytes by mutation.
inline constexpr size_t kMaxMutatedBytes = 4096;

// Applies one mutation to `message`, at most `max_depth` messages deep.
void MutateMessage(google::protobuf::Message* message, std::mt19937_64& rng,
                   int max_depth = 6);

}  // namespace pjrt::fuzz

#endif  // PJRT_TESTS_FUZZ_PROTO_MUTATOR_H_
