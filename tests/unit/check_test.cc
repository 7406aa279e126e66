// PJRT_DCHECK in both of its modes, whatever this build's default: the
// checks are switched on here, and the off mode is tested through
// DcheckOff() below, compiled in check_off_test.cc.
#undef PJRT_DCHECK_IS_ON
#define PJRT_DCHECK_IS_ON 1
#include "base/check.h"

#include "gtest/gtest.h"

namespace pjrt {

int DcheckOffEvaluations();  // check_off_test.cc

namespace {

TEST(DcheckDeathTest, AFalseConditionAbortsNamingTheFileLineAndCondition) {
  const int capacity = 0;
  EXPECT_DEATH(PJRT_DCHECK(capacity >= 1),
               "check_test.cc:[0-9]+: check failed: capacity >= 1");
}

TEST(DcheckDeathTest, WhatIsStreamedFollowsTheCondition) {
  const int amount = 7;
  EXPECT_DEATH(PJRT_DCHECK(amount <= 4)
                   << "amount " << amount << ", capacity 4",
               "check failed: amount <= 4: amount 7, capacity 4");
}

TEST(DcheckTest, ATrueConditionIsEvaluatedOnceAndPasses) {
  int evaluations = 0;
  PJRT_DCHECK(++evaluations == 1) << "never streamed";
  EXPECT_EQ(evaluations, 1);
}

TEST(DcheckTest, OffItNeverEvaluatesItsCondition) {
  EXPECT_EQ(DcheckOffEvaluations(), 0);
}

}  // namespace
}  // namespace pjrt
