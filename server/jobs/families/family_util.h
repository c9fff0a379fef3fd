// Helpers shared by the family files and the generic conversion
// (proto_convert.cc): error messages that name the proto
// field the client wrote, and the Loss enum.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <google/protobuf/message.h>

#include "core/common/status.h"
#include "core/npkl/npkl_problem.h"
#include "kls/v1/jobs.pb.h"

namespace kls::server::families {

/// A number the way the client would write it (%g-like, shortest).
std::string Num(double v);

/// INVALID_ARGUMENT "field = value is not one of allowed" unless `valid`.
Status CheckEnum(bool valid, const std::string& field, int value, const char* allowed);

/// The proto Loss → core; LOSS_UNSPECIFIED (or an unknown value) is `fallback`.
NpklLoss LossToCore(kls::v1::Loss loss, NpklLoss fallback);
kls::v1::Loss LossToProto(NpklLoss loss);
/// INVALID_ARGUMENT "<family>.loss = 9 is not a known loss (…)" for an unknown value.
Status ValidateLossEnum(const std::string& family, kls::v1::Loss loss);

/// INVALID_ARGUMENT "<field> = v exceeds the data set's n points" when v > n.
Status CheckAtMostPoints(const std::string& field, int value, int64_t n, const char* phrase = "the data set's");

/// One scalar option: the proto field's name and the core member it maps to
/// (proto double/int32/uint64/bool ↔ core double/int/uint64_t/bool).
template <class Core>
struct OptionField {
  const char* name;
  std::variant<double Core::*, int Core::*, uint64_t Core::*, bool Core::*> member;
};

namespace internal {
const google::protobuf::FieldDescriptor* FieldOrDie(const google::protobuf::Message& m, const char* name);
double GetScalar(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f, double*);
int GetScalar(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f, int*);
uint64_t GetScalar(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f, uint64_t*);
bool GetScalar(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f, bool*);
void SetScalar(google::protobuf::Message* m, const google::protobuf::FieldDescriptor* f, double v);
void SetScalar(google::protobuf::Message* m, const google::protobuf::FieldDescriptor* f, int v);
void SetScalar(google::protobuf::Message* m, const google::protobuf::FieldDescriptor* f, uint64_t v);
void SetScalar(google::protobuf::Message* m, const google::protobuf::FieldDescriptor* f, bool v);
}  // namespace internal

/// Copies every listed field that `p` sets (an unset optional field keeps
/// `o`'s value, the core default) into `o`.
template <class Core>
void CopyFromProto(const google::protobuf::Message& p, const std::vector<OptionField<Core>>& fields, Core* o) {
  for (const OptionField<Core>& field : fields) {
    const google::protobuf::FieldDescriptor* f = internal::FieldOrDie(p, field.name);
    if (f->has_presence() && !p.GetReflection()->HasField(p, f)) continue;
    std::visit([&](auto member) { o->*member = internal::GetScalar(p, f, &(o->*member)); }, field.member);
  }
}

/// Sets every listed field of `p` from `o`.
template <class Core>
void CopyToProto(const Core& o, const std::vector<OptionField<Core>>& fields, google::protobuf::Message* p) {
  for (const OptionField<Core>& field : fields) {
    const google::protobuf::FieldDescriptor* f = internal::FieldOrDie(*p, field.name);
    std::visit([&](auto member) { internal::SetScalar(p, f, o.*member); }, field.member);
  }
}

}  // namespace kls::server::families
