#include "server/jobs/families/family_util.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace kls::server::families {

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

Status CheckEnum(bool valid, const std::string& field, int value, const char* allowed) {
  if (valid) return OkStatus();
  return InvalidArgumentError(field + " = " + std::to_string(value) + " is not one of " + allowed);
}

NpklLoss LossToCore(kls::v1::Loss loss, NpklLoss fallback) {
  switch (loss) {
    case kls::v1::LINEAR: return NpklLoss::kLinear;
    case kls::v1::HINGE: return NpklLoss::kHinge;
    case kls::v1::SQUARE_HINGE: return NpklLoss::kSquareHinge;
    case kls::v1::SQUARE: return NpklLoss::kSquare;
    default: return fallback;  // LOSS_UNSPECIFIED (or an unknown future value): core default
  }
}

kls::v1::Loss LossToProto(NpklLoss loss) {
  switch (loss) {
    case NpklLoss::kLinear: return kls::v1::LINEAR;
    case NpklLoss::kHinge: return kls::v1::HINGE;
    case NpklLoss::kSquareHinge: return kls::v1::SQUARE_HINGE;
    case NpklLoss::kSquare: return kls::v1::SQUARE;
  }
  return kls::v1::LOSS_UNSPECIFIED;
}

Status ValidateLossEnum(const std::string& family, kls::v1::Loss loss) {
  if (!kls::v1::Loss_IsValid(loss)) {
    return InvalidArgumentError(family + ".loss = " + std::to_string(static_cast<int>(loss)) +
                                " is not a known loss (linear, hinge, square_hinge, square)");
  }
  return OkStatus();
}

Status CheckAtMostPoints(const std::string& field, int value, int64_t n, const char* phrase) {
  if (value <= n) return OkStatus();
  return InvalidArgumentError(field + " = " + std::to_string(value) + " exceeds " + phrase + " " +
                              std::to_string(n) + " points");
}

namespace internal {

namespace pb = google::protobuf;

const pb::FieldDescriptor* FieldOrDie(const pb::Message& m, const char* name) {
  const pb::FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(name);
  if (f == nullptr) {  // a family's field table names a field its message lacks: a build error in disguise
    std::fprintf(stderr, "kls: %s has no field %s\n", m.GetDescriptor()->full_name().c_str(), name);
    std::abort();
  }
  return f;
}

namespace {
template <class T>
T Get(const pb::Message& m, const pb::FieldDescriptor* f) {
  const pb::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: return static_cast<T>(r->GetDouble(m, f));
    case pb::FieldDescriptor::CPPTYPE_INT32: return static_cast<T>(r->GetInt32(m, f));
    case pb::FieldDescriptor::CPPTYPE_UINT64: return static_cast<T>(r->GetUInt64(m, f));
    case pb::FieldDescriptor::CPPTYPE_BOOL: return static_cast<T>(r->GetBool(m, f));
    default: break;
  }
  std::fprintf(stderr, "kls: field %s is not double, int32, uint64 or bool\n", f->full_name().c_str());
  std::abort();
}

template <class T>
void Set(pb::Message* m, const pb::FieldDescriptor* f, T v) {
  const pb::Reflection* r = m->GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: return r->SetDouble(m, f, static_cast<double>(v));
    case pb::FieldDescriptor::CPPTYPE_INT32: return r->SetInt32(m, f, static_cast<int32_t>(v));
    case pb::FieldDescriptor::CPPTYPE_UINT64: return r->SetUInt64(m, f, static_cast<uint64_t>(v));
    case pb::FieldDescriptor::CPPTYPE_BOOL: return r->SetBool(m, f, static_cast<bool>(v));
    default: break;
  }
  std::fprintf(stderr, "kls: field %s is not double, int32, uint64 or bool\n", f->full_name().c_str());
  std::abort();
}
}  // namespace

double GetScalar(const pb::Message& m, const pb::FieldDescriptor* f, double*) { return Get<double>(m, f); }
int GetScalar(const pb::Message& m, const pb::FieldDescriptor* f, int*) { return Get<int>(m, f); }
uint64_t GetScalar(const pb::Message& m, const pb::FieldDescriptor* f, uint64_t*) { return Get<uint64_t>(m, f); }
bool GetScalar(const pb::Message& m, const pb::FieldDescriptor* f, bool*) { return Get<bool>(m, f); }
void SetScalar(pb::Message* m, const pb::FieldDescriptor* f, double v) { Set(m, f, v); }
void SetScalar(pb::Message* m, const pb::FieldDescriptor* f, int v) { Set(m, f, v); }
void SetScalar(pb::Message* m, const pb::FieldDescriptor* f, uint64_t v) { Set(m, f, v); }
void SetScalar(pb::Message* m, const pb::FieldDescriptor* f, bool v) { Set(m, f, v); }

}  // namespace internal

}  // namespace kls::server::families
