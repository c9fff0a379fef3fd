#include "core/mkl/box_projection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace kls {

Status ValidateSignLabels(const Eigen::VectorXd& y, const char* field) {
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    if (y[i] != 1.0 && y[i] != -1.0) {
      return InvalidArgumentError(std::string(field) + "[" + std::to_string(i) + "] = " + FormatNumber(y[i]) +
                                  ": labels must be +1 or -1");
    }
  }
  return OkStatus();
}

double ProjectOntoBoxHyperplaneUnchecked(const Eigen::VectorXd& v, const Eigen::VectorXd& y, double c,
                                         Eigen::VectorXd& x, std::vector<double>* scratch,
                                         std::vector<int>* index_scratch, int* rounds) {
  const int n = static_cast<int>(v.size());
  x.resize(n);
  int num_pos = 0;
  for (int i = 0; i < n; ++i) num_pos += y[i] > 0;
  if (rounds) *rounds = 0;
  if (num_pos == 0 || num_pos == n) {  // P = {0}
    x.setZero();
    return 0.0;
  }
  std::vector<double> local_b;
  std::vector<int> local_u;
  std::vector<double>& breaks = scratch ? *scratch : local_b;
  std::vector<int>& active = index_scratch ? *index_scratch : local_u;
  active.resize(n);
  std::iota(active.begin(), active.end(), 0);
  breaks.clear();
  breaks.reserve(2 * static_cast<std::size_t>(n));

  // a_i and the constants of the three regimes of term i (see header).
  auto lower_break = [&](int i) { return y[i] > 0 ? y[i] * v[i] - c : y[i] * v[i]; };
  auto left_const = [&](int i) { return y[i] > 0 ? c : 0.0; };
  auto right_const = [&](int i) { return y[i] > 0 ? 0.0 : -c; };

  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  double fixed_sum = 0.0;  // A: Σ of fixed terms and of w_i over free terms
  long long free_count = 0;  // F

  // Moves every active index whose regime is constant on (lo, hi) into the
  // sums; keeps the rest.
  auto compact = [&]() {
    std::size_t keep = 0;
    for (std::size_t k = 0; k < active.size(); ++k) {
      const int i = active[k];
      const double a = lower_break(i);
      if (a >= hi) {
        fixed_sum += left_const(i);
      } else if (a + c <= lo) {
        fixed_sum += right_const(i);
      } else if (a <= lo && a + c >= hi) {
        fixed_sum += y[i] * v[i];
        ++free_count;
      } else {
        active[keep++] = i;
      }
    }
    active.resize(keep);
  };

  double lambda = 0.0;
  bool exact_hit = false;
  int round = 0;
  while (true) {
    breaks.clear();
    for (int i : active) {
      const double a = lower_break(i);
      if (a > lo && a < hi) breaks.push_back(a);
      if (a + c > lo && a + c < hi) breaks.push_back(a + c);
    }
    if (breaks.empty()) break;
    ++round;
    auto mid = breaks.begin() + static_cast<std::ptrdiff_t>(breaks.size() / 2);
    std::nth_element(breaks.begin(), mid, breaks.end());
    const double pivot = *mid;
    // h(pivot) = A − F·pivot + Σ_{active} term_i(pivot), eq. (22).
    double h = fixed_sum - static_cast<double>(free_count) * pivot;
    for (int i : active) {
      const double a = lower_break(i);
      if (pivot <= a) {
        h += left_const(i);
      } else if (pivot >= a + c) {
        h += right_const(i);
      } else {
        h += y[i] * v[i] - pivot;
      }
    }
    if (h == 0.0) {
      lambda = pivot;
      exact_hit = true;
      break;
    }
    if (h > 0.0) {
      lo = pivot;  // h nonincreasing: the root lies to the right
    } else {
      hi = pivot;
    }
    compact();
  }
  if (!exact_hit) {
    compact();  // no breakpoint inside (lo, hi): every index is settled
    if (free_count > 0) {
      lambda = fixed_sum / static_cast<double>(free_count);
      lambda = std::min(std::max(lambda, lo), hi);
    } else if (std::isfinite(lo) && std::isfinite(hi)) {
      lambda = 0.5 * (lo + hi);  // h ≡ 0 on (lo, hi); x* does not depend on λ here
    } else {
      lambda = std::isfinite(lo) ? lo : hi;
    }
  }
  for (int i = 0; i < n; ++i) x[i] = std::min(std::max(v[i] - lambda * y[i], 0.0), c);  // eq. (21)
  if (rounds) *rounds = round;
  return lambda;
}

StatusOr<BoxHyperplaneProjection> ProjectOntoBoxHyperplane(const Eigen::VectorXd& v, const Eigen::VectorXd& y,
                                                           double c) {
  return GuardExceptions("ProjectOntoBoxHyperplane", [&]() -> StatusOr<BoxHyperplaneProjection> {
    if (!(c > 0.0) || !std::isfinite(c)) {
      return InvalidArgumentError("c = " + FormatNumber(c) + ": the box bound must be finite and > 0");
    }
    if (y.size() != v.size()) {
      return InvalidArgumentError("y has " + std::to_string(y.size()) + " entries but v has " +
                                  std::to_string(v.size()));
    }
    KLS_RETURN_IF_ERROR(ValidateSignLabels(y, "y"));
    for (Eigen::Index i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) {
        return InvalidArgumentError("v[" + std::to_string(i) + "] = " + FormatNumber(v[i]) + ": must be finite");
      }
    }
    BoxHyperplaneProjection out;
    out.lambda = ProjectOntoBoxHyperplaneUnchecked(v, y, c, out.x, nullptr, nullptr, &out.rounds);
    return out;
  });
}

}  // namespace kls
