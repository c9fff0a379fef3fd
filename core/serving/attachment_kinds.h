// AttachmentKinds: the open half of a kernel's attachments. A solver family
// may store an attachment of a kind core does not know (JobOutput.attachments,
// named in its Traits::attachments); to serve it, the family's files declare
// the kind — a name, the parsed type, a parser from the stored bytes and,
// optionally, the memory the parsed value takes — and register it at static
// initialization:
//
//   KLS_REGISTER_ATTACHMENT_KIND(MyModel, "my_model", ParseMyModel);
//
// ParseAttachments (kernel_servable.h) then parses a stored attachment of that
// name into ModelAttachments' extras, and a query reads it with
// `servable.attachments().Extra<MyModel>("my_model")`. The built-in kinds
// (classifier, social_graph, social_klr, feature_scaling, linear_map) keep
// their own members of ModelAttachments; a kind may not take one of their
// names, nor a name registered before. Names nobody registered are skipped
// when parsing (an attachment from a newer server, or from a family this
// build does not carry).
//
// Thread safety: Add runs during static initialization (or, in tests, before
// any parse); afterwards the registry is read-only and may be read from any
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/common/status.h"
#include "core/model/learned_kernel.h"

namespace kls {

/// One parsed attachment of a registered kind: the value, type-erased, with
/// the type it holds.
struct ExtraAttachment {
  std::shared_ptr<const void> value;  ///< never null
  std::type_index type = typeid(void);
};

/// A kind of attachment: its name and how its bytes become a value.
struct AttachmentKind {
  /// The stored bytes → the value (of `type`); the kernel is the one the
  /// attachment was stored with, for checks against its size or rank. An
  /// error's message need not name the attachment: ParseAttachments returns
  /// DATA_LOSS "<name>: <message>".
  using Parser =
      std::function<StatusOr<std::shared_ptr<const void>>(const std::string& bytes, const LearnedKernel& kernel)>;
  /// The memory the parsed value takes (ModelAttachments::bytes); when unset,
  /// the stored bytes' size.
  using Memory = std::function<int64_t(const void* value)>;

  std::string name;
  std::type_index type = typeid(void);
  Parser parse;
  Memory memory;

  /// A kind whose values are `T`: `parse` is callable as
  /// StatusOr<T>(const std::string& bytes) or
  /// StatusOr<T>(const std::string& bytes, const LearnedKernel& kernel);
  /// `memory`, when given, as int64_t(const T&).
  template <class T, class Parse>
  static AttachmentKind Of(std::string name, Parse parse, std::function<int64_t(const T&)> memory = {});
};

class AttachmentKinds {
 public:
  /// The kinds ParseAttachments uses by default (KLS_REGISTER_ATTACHMENT_KIND).
  static AttachmentKinds& Global();

  /// Registers `kind`. INVALID_ARGUMENT for an empty name, a missing parser
  /// or the name of a built-in kind; ALREADY_EXISTS for a name registered
  /// before. Nothing is registered on an error.
  Status Add(AttachmentKind kind);
  /// Add, or print the error and abort the program (a build error in
  /// disguise, found at start-up): what the registration macro calls.
  void AddOrDie(AttachmentKind kind);

  /// The kind named `name`, or null.
  const AttachmentKind* Find(std::string_view name) const;
  /// The registered names, sorted.
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, AttachmentKind, std::less<>> kinds_;
};

/// The built-in attachment names (kernel_servable.h), which no kind may take.
bool IsBuiltinAttachment(std::string_view name);

template <class T, class Parse>
AttachmentKind AttachmentKind::Of(std::string name, Parse parse, std::function<int64_t(const T&)> memory) {
  AttachmentKind kind;
  kind.name = std::move(name);
  kind.type = typeid(T);
  kind.parse = [parse = std::move(parse)](const std::string& bytes,
                                          const LearnedKernel& kernel) -> StatusOr<std::shared_ptr<const void>> {
    StatusOr<T> value = [&] {
      if constexpr (std::is_invocable_v<const Parse&, const std::string&, const LearnedKernel&>) {
        return StatusOr<T>(parse(bytes, kernel));
      } else {
        return StatusOr<T>(parse(bytes));
      }
    }();
    if (!value.ok()) return value.status();
    return std::shared_ptr<const void>(std::make_shared<const T>(std::move(value).value()));
  };
  if (memory) {
    kind.memory = [memory = std::move(memory)](const void* value) { return memory(*static_cast<const T*>(value)); };
  }
  return kind;
}

/// Registers an attachment kind at static initialization; in the family's
/// file, at namespace scope:
///   KLS_REGISTER_ATTACHMENT_KIND(Type, "name", ParseType);
///   KLS_REGISTER_ATTACHMENT_KIND(Type, "name", ParseType, MemoryOfType);
/// (arguments as for AttachmentKind::Of<Type>). A name registered twice, or
/// a built-in one, aborts the program at start-up.
#define KLS_REGISTER_ATTACHMENT_KIND(Type, ...)                                                   \
  [[maybe_unused]] static const bool KLS_CONCAT_(kls_registered_attachment_kind_, __LINE__) = [] { \
    ::kls::AttachmentKinds::Global().AddOrDie(::kls::AttachmentKind::Of<Type>(__VA_ARGS__));       \
    return true;                                                                                   \
  }()

}  // namespace kls
