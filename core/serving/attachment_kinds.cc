#include "core/serving/attachment_kinds.h"

#include <cstdio>
#include <cstdlib>

#include "core/serving/kernel_servable.h"

namespace kls {

bool IsBuiltinAttachment(std::string_view name) {
  for (const char* builtin : {kClassifierAttachment, kSocialGraphAttachment, kSocialKlrAttachment,
                              kFeatureScalingAttachment, kLinearMapAttachment}) {
    if (name == builtin) return true;
  }
  return false;
}

AttachmentKinds& AttachmentKinds::Global() {
  static AttachmentKinds* const kinds = new AttachmentKinds();  // never destroyed: read until exit
  return *kinds;
}

Status AttachmentKinds::Add(AttachmentKind kind) {
  if (kind.name.empty()) return InvalidArgumentError("attachment kind: the name is empty");
  if (!kind.parse) return InvalidArgumentError("attachment kind " + kind.name + ": no parser");
  if (IsBuiltinAttachment(kind.name)) {
    return InvalidArgumentError("attachment kind " + kind.name + ": the name of a built-in attachment");
  }
  if (kinds_.count(kind.name) > 0) {
    return Status(StatusCode::kAlreadyExists, "attachment kind " + kind.name + " is registered already");
  }
  std::string name = kind.name;
  kinds_.emplace(std::move(name), std::move(kind));
  return OkStatus();
}

void AttachmentKinds::AddOrDie(AttachmentKind kind) {
  const Status s = Add(std::move(kind));
  if (s.ok()) return;
  std::fprintf(stderr, "kls: %s\n", s.message().c_str());
  std::abort();
}

const AttachmentKind* AttachmentKinds::Find(std::string_view name) const {
  const auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : &it->second;
}

std::vector<std::string> AttachmentKinds::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, kind] : kinds_) out.push_back(name);
  return out;
}

}  // namespace kls
