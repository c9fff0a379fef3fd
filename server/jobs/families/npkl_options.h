// Proto ↔ core conversions of the three NPKL families' options, exposed for
// tests and tools (the registry uses them through the family objects).
// ToCore: every unset optional field keeps the core struct's in-class
// default. ToProto: sets every field (ToCore(ToProto(x)) == x for the fields
// the proto mirrors).
#pragma once

#include "core/npkl/bcd_npkl.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"
#include "kls/v1/jobs.pb.h"

namespace kls::server {

/// The families' names (JobRecord::method), as registered.
inline constexpr const char* kMethodKlAdmm = "kl_admm";
inline constexpr const char* kMethodBcdNpkl = "bcd_npkl";
inline constexpr const char* kMethodSimpleNpkl = "simple_npkl";

KlAdmmOptions ToCore(const kls::v1::KlAdmmOptions& p);
BcdNpklOptions ToCore(const kls::v1::BcdNpklOptions& p);
SimpleNpklOptions ToCore(const kls::v1::SimpleNpklOptions& p);
kls::v1::KlAdmmOptions ToProto(const KlAdmmOptions& o);
kls::v1::BcdNpklOptions ToProto(const BcdNpklOptions& o);
kls::v1::SimpleNpklOptions ToProto(const SimpleNpklOptions& o);

}  // namespace kls::server
