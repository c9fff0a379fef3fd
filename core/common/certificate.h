// The optimality certificate of a solve, under one name for every solver
// family: what the service stores with a kernel (summary_json "certificate",
// kls.v1.Certificate in Job and KernelInfo).
#pragma once

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace kls {

struct Certificate {
  /// Relative duality gap (objective − lower_bound) / max(1, |objective|)
  /// of the returned solution, certified by a dual-feasible point; NaN where
  /// the method has no dual bound.
  double gap = std::numeric_limits<double>::quiet_NaN();
  /// The certified bound on the optimal value (a lower bound for a
  /// minimization, an upper bound for a maximization); NaN when not computed.
  double lower_bound = std::numeric_limits<double>::quiet_NaN();
  /// A stationarity / KKT residual of the returned solution; NaN when not computed.
  double kkt_residual = std::numeric_limits<double>::quiet_NaN();
  /// True when `gap` is finite and within the solve's tolerance: the solution
  /// is proven optimal to that tolerance.
  bool certified = false;

  /// A gap checked against `tolerance`.
  static Certificate FromGap(double gap, double tolerance) {
    Certificate c;
    c.gap = gap;
    c.CheckAgainst(tolerance);
    return c;
  }
  /// Sets `certified` from `gap` and the solver's tolerance: the one meaning
  /// of "certified" (the gap is finite and at most the tolerance).
  void CheckAgainst(double tolerance) { certified = std::isfinite(gap) && gap <= tolerance; }

  /// {"gap":…,"lower_bound":…,"kkt_residual":…,"certified":true}; members
  /// that are NaN are left out.
  std::string Json() const {
    std::string out = "{";
    auto add = [&](const char* name, double v) {
      if (!std::isfinite(v)) return;
      char buf[64];
      std::snprintf(buf, sizeof(buf), "\"%s\":%.17g,", name, v);
      out += buf;
    };
    add("gap", gap);
    add("lower_bound", lower_bound);
    add("kkt_residual", kkt_residual);
    out += std::string("\"certified\":") + (certified ? "true" : "false") + "}";
    return out;
  }
};

}  // namespace kls
