// Scale of the tests' wall-clock bounds. A sanitizer build runs 5–15× slower
// (ThreadSanitizer: a KL-ADMM job of 3 s takes 78 s), so `make test
// SANITIZE=thread` sets KLS_TEST_TIME_SCALE=10 and a test that bounds elapsed
// time ("stops within 100 ms of its deadline", "taken over within lease +
// 2 s") multiplies its slack by TimeScale(). Unset, empty or invalid = 1, so
// the normal suite keeps its bounds.
#pragma once

#include <cstdlib>

namespace kls::testing {

inline double TimeScale() {
  const char* v = std::getenv("KLS_TEST_TIME_SCALE");
  if (v == nullptr || *v == '\0') return 1.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  return (*end == '\0' && s >= 1.0 && s <= 1000.0) ? s : 1.0;
}

}  // namespace kls::testing
