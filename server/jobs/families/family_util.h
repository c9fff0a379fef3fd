// Helpers shared by the family files and the generic conversion
// (proto_convert.cc): error messages that name the proto
// field the client wrote, and the Loss enum.
#pragma once

#include <string>

#include "core/common/status.h"
#include "core/npkl/npkl_problem.h"
#include "kls/v1/jobs.pb.h"

namespace kls::server::families {

/// A number the way the client would write it (%g-like, shortest).
std::string Num(double v);

/// INVALID_ARGUMENT "field = value is not one of allowed" unless `valid`.
Status CheckEnum(bool valid, const std::string& field, int value, const char* allowed);

/// Names a core validator's field the way the client wrote it: core
/// validators say "options.gamma = …" (or "onk …"); the client wrote
/// "kl_admm.gamma". `family` is the family's name.
Status Prefixed(const Status& s, const std::string& family);

/// Replaces a core validator's leading "options." by "<family>." and leaves
/// other messages as they are (the NPKL validators).
Status RenameOptionsField(const Status& s, const std::string& family);

/// The proto Loss → core; LOSS_UNSPECIFIED (or an unknown value) is `fallback`.
NpklLoss LossToCore(kls::v1::Loss loss, NpklLoss fallback);
kls::v1::Loss LossToProto(NpklLoss loss);
/// INVALID_ARGUMENT "<family>.loss = 9 is not a known loss (…)" for an unknown value.
Status ValidateLossEnum(const std::string& family, kls::v1::Loss loss);

/// INVALID_ARGUMENT "<field> = v exceeds the data set's n points" when v > n.
Status CheckAtMostPoints(const std::string& field, int value, int64_t n, const char* phrase = "the data set's");

}  // namespace kls::server::families
