#include "device/platform.h"

#include "absl/strings/str_format.h"

namespace pjrt::device {

const char* AllocationModelName(AllocationModel model) {
  switch (model) {
    case AllocationModel::kSynchronous:
      return "synchronous";
    case AllocationModel::kComputeSynchronized:
      return "compute-synchronized";
    case AllocationModel::kAsynchronous:
      return "asynchronous";
  }
  return "unknown";
}

absl::StatusOr<AllocationModel> ParseAllocationModel(const std::string& name) {
  for (AllocationModel model :
       {AllocationModel::kSynchronous, AllocationModel::kComputeSynchronized,
        AllocationModel::kAsynchronous}) {
    if (name == AllocationModelName(model)) return model;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("allocation model '%s' is unknown; expected synchronous, "
                      "compute-synchronized or asynchronous",
                      name));
}

}  // namespace pjrt::device
