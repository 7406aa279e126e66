// PJRT_DCHECK as release builds compile it (see check_test.cc).
#undef PJRT_DCHECK_IS_ON
#define PJRT_DCHECK_IS_ON 0
#include "base/check.h"

namespace pjrt {

// Runs failing checks with side effects; returns how many were evaluated.
int DcheckOffEvaluations() {
  int evaluations = 0;
  PJRT_DCHECK(++evaluations < 0) << "not printed";
  PJRT_DCHECK(false);
  return evaluations;
}

}  // namespace pjrt
