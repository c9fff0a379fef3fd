// qsdp's core settings (RegPCP / RegMVU, core/qsdp), exposed for tests.
#pragma once

#include "core/qsdp/qsdp_subspace.h"
#include "core/qsdp/reg_problems.h"

namespace kls::server {

/// RegPCP / RegMVU job settings.
struct QsdpJobOptions {
  bool mvu = false;            ///< RegMVU (else RegPCP)
  RegPcpOptions pcp;
  RegMvuOptions mvu_options;   ///< connect = the request's graph.connect
  QsdpSubspaceOptions solver;  ///< the interior-point / face solver (qsdp_subspace.h)
};

}  // namespace kls::server
