// `kls submit`'s flags from the options messages' descriptors (submit_flags.h).
#include "client/cli/submit_flags.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <algorithm>
#include <cstdint>
#include <cctype>
#include <sstream>
#include <utility>

#include "client/cli/common.h"
#include "client/client.h"
#include "proto/descriptor_set.h"

namespace kls::cli {
namespace {

namespace pb = google::protobuf;

constexpr char kTypeUrlPrefix[] = "type.googleapis.com";

// Request-level flags of `kls submit`: a field whose own spelling is one of
// these is given by its (kls.v1.cli_alias) spellings only.
const std::set<std::string>& ReservedFlags() {
  static const std::set<std::string> names = {
      "--dataset",       "--kernel",  "--method",       "--priority",    "--deadline-seconds", "--watch",
      "--print-request", "--graph-k", "--graph-weight", "--graph-sigma", "--graph-delta",      "--graph-connect", "--graph-search",
      "--cv-folds",      "--cv-grid", "--cv-threads",   "--cv-clusters", "--warm-start",       "--scaling",
      "--no-baseline-guard", "--help"};
  return names;
}

// The string value of the custom option `extension` in `options` ("" when
// unset). Read from the serialized options, so it does not matter whether the
// pool resolved the option as an extension or kept it as an unknown field.
std::string StringOption(const pb::Message& options, const pb::FieldDescriptor* extension) {
  if (extension == nullptr) return "";
  pb::UnknownFieldSet fields;
  if (!fields.ParseFromString(options.SerializeAsString())) return "";
  std::string value;
  for (int i = 0; i < fields.field_count(); ++i) {
    const pb::UnknownField& f = fields.field(i);
    if (f.number() == extension->number() && f.type() == pb::UnknownField::TYPE_LENGTH_DELIMITED) {
      value = f.length_delimited();
    }
  }
  return value;
}

std::vector<std::string> CommaList(const std::string& text) {
  std::vector<std::string> items;
  for (const std::string& raw : Split(text, ',')) {
    const std::string item = Trim(raw);
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

// Lower case, '-' for '_': how enum values and flag values compare.
std::string Normalized(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string FlagSpelling(std::string name) {
  while (!name.empty() && name.front() == '-') name.erase(name.begin());
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

// "a, b and c" / "a, b or c".
std::string JoinWords(const std::vector<std::string>& words, const std::string& last) {
  std::string text;
  for (size_t i = 0; i < words.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == words.size() ? " " + last + " " : ", ") + words[i];
  }
  return text;
}

std::string JoinComma(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : ", ") + w;
  return text;
}

// A field's proto comment (leading, then trailing) on one line.
std::string Comment(const pb::FieldDescriptor* field) {
  pb::SourceLocation location;
  if (!field->GetSourceLocation(&location)) return "";
  std::istringstream words(location.leading_comments + " " + location.trailing_comments);
  std::string word, text;
  while (words >> word) text += (text.empty() ? "" : " ") + word;
  return text;
}

// The values an enum flag takes: the value names (lower case) or, where
// (kls.v1.cli_value_alias) gives spellings, the first of those; the
// X_UNSPECIFIED = 0 placeholder is not offered.
bool Offered(const pb::EnumValueDescriptor* v) {
  const std::string& name = v->name();
  const std::string suffix = "UNSPECIFIED";
  return !(v->number() == 0 && name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
}

}  // namespace

SubmitFlags::~SubmitFlags() = default;

StatusOr<std::unique_ptr<SubmitFlags>> SubmitFlags::FromKlsProtos() {
  return FromDescriptorSet(kls::proto::KlsDescriptorSet());
}

StatusOr<std::unique_ptr<SubmitFlags>> SubmitFlags::FromDescriptorSet(std::string_view bytes) {
  std::unique_ptr<SubmitFlags> flags(new SubmitFlags());
  pb::FileDescriptorSet set;
  if (!set.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InternalError("the KLS descriptor set does not parse");
  }
  flags->pool_ = std::make_unique<pb::DescriptorPool>();
  for (const pb::FileDescriptorProto& file : set.file()) {
    if (flags->pool_->BuildFile(file) == nullptr) {
      return InternalError("the KLS descriptor set: cannot build " + file.name());
    }
    flags->file_names_.push_back(file.name());
  }
  flags->factory_ = std::make_unique<pb::DynamicMessageFactory>(flags->pool_.get());
  KLS_RETURN_IF_ERROR(flags->Discover());
  return flags;
}

const SubmitFlags::Family* SubmitFlags::FindFamily(const std::string& name) const {
  for (const Family& f : families_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Status SubmitFlags::Discover() {
  const pb::Descriptor* request = pool_->FindMessageTypeByName("kls.v1.SubmitJobRequest");
  const pb::OneofDescriptor* solver = request ? request->FindOneofByName("solver") : nullptr;
  if (solver == nullptr) return InternalError("the KLS descriptor set has no kls.v1.SubmitJobRequest.solver");
  const pb::FieldDescriptor* family_ext = pool_->FindExtensionByName("kls.v1.family");
  const pb::FieldDescriptor* job_fields_ext = pool_->FindExtensionByName("kls.v1.cli_job_fields");

  const auto add_family = [&](const std::string& name, const pb::Descriptor* options, bool packed) -> Status {
    if (FindFamily(name) != nullptr) return InternalError("two solver families are named '" + name + "'");
    Family f{name, options, packed, {}, options->FindFieldByName("gamma")};
    if (f.weight == nullptr) f.weight = options->FindFieldByName("c");
    for (const std::string& j : CommaList(StringOption(options->options(), job_fields_ext))) f.job_fields.insert(j);
    families_.push_back(std::move(f));
    return OkStatus();
  };
  // (a) The oneof's message fields but the Any.
  for (int i = 0; i < solver->field_count(); ++i) {
    const pb::FieldDescriptor* field = solver->field(i);
    if (field->type() != pb::FieldDescriptor::TYPE_MESSAGE ||
        field->message_type()->full_name() == "google.protobuf.Any") {
      continue;
    }
    KLS_RETURN_IF_ERROR(add_family(field->name(), field->message_type(), false));
  }
  // (b) Every message carrying (kls.v1.family), in file order.
  std::vector<const pb::Descriptor*> stack;
  for (const std::string& file_name : file_names_) {
    const pb::FileDescriptor* file = pool_->FindFileByName(file_name);
    for (int i = file->message_type_count() - 1; i >= 0; --i) stack.push_back(file->message_type(i));
    while (!stack.empty()) {
      const pb::Descriptor* m = stack.back();
      stack.pop_back();
      const std::string name = StringOption(m->options(), family_ext);
      if (!name.empty()) KLS_RETURN_IF_ERROR(add_family(name, m, true));
      for (int i = m->nested_type_count() - 1; i >= 0; --i) stack.push_back(m->nested_type(i));
    }
  }
  for (const Family& f : families_) {
    const Status s = AddFamilyFields(f);
    if (!s.ok() && setup_error_.ok()) setup_error_ = s;
  }
  for (Flag& flag : flags_) {
    if (flag.weight) flag.kind = Kind::kText;  // a number or "auto"
  }
  return OkStatus();
}

Status SubmitFlags::AddFamilyFields(const Family& family) {
  const pb::FieldDescriptor* alias_ext = pool_->FindExtensionByName("kls.v1.cli_alias");
  for (int i = 0; i < family.options->field_count(); ++i) {
    const pb::FieldDescriptor* field = family.options->field(i);
    // Message fields have no flag; repeated numbers and strings take a comma-separated list.
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated() && (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM ||
                                 field->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL)) {
      continue;
    }
    std::vector<std::string> names;
    const std::string own = FlagSpelling(field->name());
    if (ReservedFlags().count(own) == 0) names.push_back(own);
    for (const std::string& alias : CommaList(StringOption(field->options(), alias_ext))) {
      const std::string name = FlagSpelling(alias);
      if (ReservedFlags().count(name) > 0) {
        return InternalError(field->full_name() + ": (kls.v1.cli_alias) " + name + " is a request-level flag");
      }
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    Kind kind = Kind::kText;
    switch (field->is_repeated() ? pb::FieldDescriptor::CPPTYPE_STRING : field->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32:
        kind = Kind::kInt32;
        break;
      case pb::FieldDescriptor::CPPTYPE_INT64:
        kind = Kind::kInt64;
        break;
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        kind = Kind::kUint32;
        break;
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        kind = Kind::kUint64;
        break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      case pb::FieldDescriptor::CPPTYPE_FLOAT:
        kind = Kind::kDouble;
        break;
      case pb::FieldDescriptor::CPPTYPE_BOOL:
        kind = Kind::kBool;
        break;
      default:
        kind = Kind::kText;
        break;  // string, bytes, enum
    }
    for (const std::string& name : names) {
      Flag* flag = nullptr;
      if (auto it = by_name_.find(name); it != by_name_.end()) {
        flag = it->second;
        if (flag->fields.count(family.name) > 0) {
          return InternalError(family.name + ": " + flag->fields.at(family.name)->name() + " and " + field->name() +
                               " are both " + name);
        }
        if (flag->kind != kind) flag->kind = Kind::kText;  // parsed per field below
      } else {
        flag = &flags_.emplace_back();
        flag->name = name;
        flag->kind = kind;
        by_name_[name] = flag;
      }
      flag->fields[family.name] = field;
      flag->families.push_back(family.name);
      if (field == family.weight) flag->weight = true;
    }
  }
  return OkStatus();
}

const SubmitFlags::Flag* SubmitFlags::FlagOfField(const Family& family, const pb::FieldDescriptor* field) const {
  for (const Flag& flag : flags_) {
    auto it = flag.fields.find(family.name);
    if (it != flag.fields.end() && it->second == field) return &flag;
  }
  return nullptr;
}

std::string SubmitFlags::FamiliesWith(const std::string& job_field) const {
  std::vector<std::string> names;
  for (const Family& f : families_) {
    if (f.job_fields.count(job_field) > 0) names.push_back(f.name);
  }
  return JoinWords(names, "and");
}

std::string SubmitFlags::HelpText(const Flag& flag) const {
  const pb::FieldDescriptor* requires_ext = pool_->FindExtensionByName("kls.v1.cli_requires");
  const pb::FieldDescriptor* value_alias_ext = pool_->FindExtensionByName("kls.v1.cli_value_alias");
  // Families whose fields read the same, together: "fam_a, fam_b: comment".
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::string& family : flag.families) {
    const pb::FieldDescriptor* field = flag.fields.at(family);
    std::string text = Comment(field);
    if (field->is_repeated()) text += (text.empty() ? "" : " ") + std::string("(comma-separated list)");
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM) {
      std::vector<std::string> values;
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        const pb::EnumValueDescriptor* v = field->enum_type()->value(i);
        if (!Offered(v)) continue;
        const std::vector<std::string> aliases = CommaList(StringOption(v->options(), value_alias_ext));
        values.push_back(aliases.empty() ? Normalized(v->name()) : aliases.front());
      }
      std::string choices;
      for (const std::string& v : values) choices += (choices.empty() ? "" : "|") + v;
      text += (text.empty() ? "" : " ") + ("[" + choices + "]");
    } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL) {
      text += (text.empty() ? "" : " ") + std::string("(true/false)");
    }
    if (flag.weight && field == FindFamily(family)->weight &&
        FindFamily(family)->job_fields.count("cross_validation") > 0) {
      text += (text.empty() ? "" : " ") + std::string("(or auto: cross-validation, --cv-*)");
    }
    const std::string requires_text = StringOption(field->options(), requires_ext);
    if (const size_t eq = requires_text.find('='); eq != std::string::npos) {
      const pb::FieldDescriptor* other = field->containing_type()->FindFieldByName(requires_text.substr(0, eq));
      const Flag* other_flag = other ? FlagOfField(*FindFamily(family), other) : nullptr;
      if (other_flag)
        text += (text.empty() ? "" : " ") + ("(with " + other_flag->name + " " + requires_text.substr(eq + 1) + ")");
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == text; });
    if (it == groups.end()) {
      groups.push_back({text, {family}});
    } else {
      it->second.push_back(family);
    }
  }
  std::string help;
  for (const auto& [text, families] : groups) {
    help += (help.empty() ? "" : "; ") + JoinComma(families) + (text.empty() ? "" : ": " + text);
  }
  return help;
}

void SubmitFlags::AddFlags(CLI::App* app) {
  std::vector<std::string> names;
  for (const Family& f : families_) names.push_back(f.name);
  app->add_option("--dataset", common_.dataset, "Data-set id (from upload) or name (the newest of that name)")->required();
  app->add_option("--kernel", common_.kernel, "Name of the kernel to learn (versions increment per name)");
  app->add_option("--method", common_.method, JoinWords(names, "or"))->required();
  app->add_option("--priority", common_.priority, "Higher runs first");
  app->add_option("--deadline-seconds", common_.deadline_seconds, "Solver time limit (0 = none)");
  for (Flag& flag : flags_) {
    const std::string help = HelpText(flag);
    switch (flag.kind) {
      case Kind::kInt32:
        flag.option = app->add_option(flag.name, flag.i32, help);
        break;
      case Kind::kInt64:
        flag.option = app->add_option(flag.name, flag.i64, help);
        break;
      case Kind::kUint32:
        flag.option = app->add_option(flag.name, flag.u32, help);
        break;
      case Kind::kUint64:
        flag.option = app->add_option(flag.name, flag.u64, help);
        break;
      case Kind::kDouble:
        flag.option = app->add_option(flag.name, flag.d, help);
        break;
      case Kind::kBool:
        flag.option = app->add_option(flag.name, flag.b, help);
        break;
      case Kind::kText:
        flag.option = app->add_option(flag.name, flag.text, help);
        break;
    }
  }
  const auto graph = [&](const std::string& name, auto& value, const std::string& help) {
    common_.graph_flags[name] = app->add_option(name, value, help);
  };
  graph("--graph-k", common_.graph_k, "Graph: neighbours (default 5)");
  graph("--graph-weight", common_.graph_weight, "Graph: binary or gaussian");
  graph("--graph-sigma", common_.graph_sigma, "Graph: Gaussian width (0 = auto)");
  graph("--graph-delta", common_.graph_delta, "Graph: δ ≥ 0");
  graph("--graph-search", common_.graph_search,
        "Graph: k-NN search auto (exact up to 50,000 points, ivf above), exact, ivf or hnsw");
  common_.graph_connect_flag = app->add_option(
      "--graph-connect", common_.graph_connect,
      FamiliesWith("graph.connect") +
          ", disconnected k-NN graph: error, grow_k or mst (default: join components by shortest edges)");
  app->add_option("--cv-folds", common_.cv_folds, "--c/--gamma auto: folds (default 3)");
  app->add_option("--cv-grid", common_.cv_grid, "--c/--gamma auto: candidates 'a,b,c' (default 0.1,1,10)");
  app->add_option("--cv-threads", common_.cv_threads,
                  "--c/--gamma auto: parallel (value, fold) learns (default 1, 0 = all cores)");
  app->add_option("--cv-clusters", common_.cv_clusters,
                  "--c/--gamma auto, for a kernel to be clustered into C groups: score held-out pairs by kernel "
                  "k-means with C clusters (default: by a K_ij threshold)");
  app->add_option(
      "--warm-start", common_.warm_start,
      FamiliesWith("warm_start") + ": start from kernel NAME[:VERSION] of a data set with the same features");
  app->add_flag("--no-baseline-guard", common_.no_baseline_guard,
               FamiliesWith("cross_validation") +
                   ": skip the baseline guard (the learned kernel scored against plain linear and RBF kernels and the "
                   "graph's diffusion kernel on "
                   "held-out pairs; without --c/--gamma auto it costs one more learn)");
  app->add_option("--scaling", common_.scaling,
                  "Feature scaling: none (default), zscore or minmax; "
                  "stored with the kernel and applied to feature queries");
}

Status SubmitFlags::SetField(const Flag& flag, const pb::FieldDescriptor* field, pb::Message* m) const {
  const pb::Reflection* r = m->GetReflection();
  const std::string& text = flag.text;
  const auto bad = [&](const std::string& what) {
    return InvalidArgumentError(flag.name + " = '" + text + "' is not " + what);
  };
  if (field->is_repeated()) {  // 'a,b,c'
    for (const std::string& item : CommaList(text)) {
      double d = 0.0;
      int64_t i = 0;
      uint64_t u = 0;
      switch (field->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_STRING:
          r->AddString(m, field, item);
          break;
        case pb::FieldDescriptor::CPPTYPE_DOUBLE:
        case pb::FieldDescriptor::CPPTYPE_FLOAT:
          if (!ParseDouble(item, &d)) return bad("a comma-separated list of numbers");
          field->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT ? r->AddFloat(m, field, static_cast<float>(d))
                                                                 : r->AddDouble(m, field, d);
          break;
        case pb::FieldDescriptor::CPPTYPE_INT32:
        case pb::FieldDescriptor::CPPTYPE_INT64:
          if (!CLI::detail::lexical_cast(item, i)) return bad("a comma-separated list of integers");
          if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64) {
            r->AddInt64(m, field, i);
          } else if (i < INT32_MIN || i > INT32_MAX) {
            return bad("a comma-separated list of 32-bit integers");
          } else {
            r->AddInt32(m, field, static_cast<int32_t>(i));
          }
          break;
        case pb::FieldDescriptor::CPPTYPE_UINT32:
        case pb::FieldDescriptor::CPPTYPE_UINT64:
          if (!CLI::detail::lexical_cast(item, u)) return bad("a comma-separated list of non-negative integers");
          if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT64) {
            r->AddUInt64(m, field, u);
          } else if (u > UINT32_MAX) {
            return bad("a comma-separated list of 32-bit non-negative integers");
          } else {
            r->AddUInt32(m, field, static_cast<uint32_t>(u));
          }
          break;
        default:
          return InternalError(flag.name + ": a repeated " + field->cpp_type_name() + " field has no flag");
      }
    }
    return OkStatus();
  }
  // A value CLI11 converted (the flag's kind is the field's), or the text converted here.
  const auto get = [&](Kind kind, auto stored, auto* out, const char* what) -> Status {
    if (flag.kind == kind) {
      *out = stored;
      return OkStatus();
    }
    if (!CLI::detail::lexical_cast(Trim(text), *out)) return bad(what);
    return OkStatus();
  };
  // The integer and bool kinds: get the value, then the reflection setter.
  const auto set = [&](Kind kind, auto stored, const char* what, auto setter) -> Status {
    decltype(stored) v{};
    KLS_RETURN_IF_ERROR(get(kind, stored, &v, what));
    (r->*setter)(m, field, v);
    return OkStatus();
  };
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      KLS_RETURN_IF_ERROR(set(Kind::kInt32, flag.i32, "an integer", &pb::Reflection::SetInt32));
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      KLS_RETURN_IF_ERROR(set(Kind::kInt64, flag.i64, "an integer", &pb::Reflection::SetInt64));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      KLS_RETURN_IF_ERROR(set(Kind::kUint32, flag.u32, "a non-negative integer", &pb::Reflection::SetUInt32));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      KLS_RETURN_IF_ERROR(set(Kind::kUint64, flag.u64, "a non-negative integer", &pb::Reflection::SetUInt64));
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      double v = flag.d;
      if (flag.kind != Kind::kDouble && !ParseDouble(text, &v))
        return bad(flag.weight ? "a number or auto" : "a number");
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT) {
        r->SetFloat(m, field, static_cast<float>(v));
      } else {
        r->SetDouble(m, field, v);
      }
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      KLS_RETURN_IF_ERROR(set(Kind::kBool, flag.b, "true or false", &pb::Reflection::SetBool));
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      r->SetString(m, field, text);
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::FieldDescriptor* value_alias_ext = pool_->FindExtensionByName("kls.v1.cli_value_alias");
      std::vector<std::string> offered;
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        const pb::EnumValueDescriptor* v = field->enum_type()->value(i);
        if (!Offered(v)) continue;
        const std::vector<std::string> aliases = CommaList(StringOption(v->options(), value_alias_ext));
        bool match = Normalized(v->name()) == Normalized(Trim(text));
        for (const std::string& a : aliases) match = match || Normalized(a) == Normalized(Trim(text));
        if (match) {
          r->SetEnumValue(m, field, v->number());
          return OkStatus();
        }
        offered.push_back(aliases.empty() ? Normalized(v->name()) : aliases.front());
      }
      return bad("one of " + JoinComma(offered));
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return InternalError(flag.name + ": message fields have no flag");
  }
  return OkStatus();
}

StatusOr<kls::v1::SubmitJobRequest> SubmitFlags::BuildRequest() const {
  KLS_RETURN_IF_ERROR(setup_error_);
  const Common& a = common_;
  const Family* family = FindFamily(a.method);
  if (family == nullptr) {
    std::vector<std::string> names;
    for (const Family& f : families_) names.push_back(f.name);
    return InvalidArgumentError("--method = '" + a.method + "' is not one of " + JoinComma(names));
  }
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(a.dataset);
  r.set_kernel_name(a.kernel);
  r.set_priority(a.priority);
  r.set_deadline_seconds(a.deadline_seconds);

  // The graph (for families that build it from the request) and the scaling.
  KLS_RETURN_IF_ERROR(SetGraphAndScaling(&r));
  const CvGroups cv_groups = CrossValidationGroups();
  bool weight_auto = false;
  KLS_ASSIGN_OR_RETURN(const std::unique_ptr<pb::Message> options, FamilyOptions(*family, cv_groups, &weight_auto));
  KLS_RETURN_IF_ERROR(CheckRequires(*family, *options));
  KLS_RETURN_IF_ERROR(SetJobFields(*family, weight_auto, cv_groups, &r));
  KLS_RETURN_IF_ERROR(PutOptions(*family, *options, &r));
  return r;
}

Status SubmitFlags::SetGraphAndScaling(kls::v1::SubmitJobRequest* out) const {
  const Common& a = common_;
  kls::v1::SubmitJobRequest& r = *out;
  const auto given = [&](const std::string& name) { return a.graph_flags.at(name)->count() > 0; };
  kls::v1::GraphSpec* g = r.mutable_graph();
  if (given("--graph-k")) g->set_k(a.graph_k);
  if (given("--graph-sigma")) g->set_sigma(a.graph_sigma);
  if (given("--graph-delta")) g->set_delta(a.graph_delta);
  if (given("--graph-weight")) {
    if (a.graph_weight == "binary") {
      g->set_weight(kls::v1::GraphSpec::BINARY);
    } else if (a.graph_weight == "gaussian") {
      g->set_weight(kls::v1::GraphSpec::GAUSSIAN);
    } else {
      return InvalidArgumentError("--graph-weight = '" + a.graph_weight + "' is not binary or gaussian");
    }
  }
  if (given("--graph-search")) {
    kls::v1::GraphSpec::Search search;
    std::string upper = a.graph_search;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (!kls::v1::GraphSpec::Search_Parse(upper, &search) || search == kls::v1::GraphSpec::SEARCH_UNSPECIFIED) {
      return InvalidArgumentError("--graph-search = '" + a.graph_search + "' is not one of auto, exact, ivf, hnsw");
    }
    g->set_search(search);
  }
  if (a.graph_connect_flag->count() > 0) {
    const std::vector<std::pair<std::string, kls::v1::GraphSpec::Connect>> choices = {
        {"error", kls::v1::GraphSpec::CONNECT_ERROR},
        {"grow_k", kls::v1::GraphSpec::GROW_K},
        {"mst", kls::v1::GraphSpec::MST}};
    auto it = std::find_if(choices.begin(), choices.end(), [&](const auto& c) { return c.first == a.graph_connect; });
    if (it == choices.end()) {
      return InvalidArgumentError("--graph-connect = '" + a.graph_connect + "' is not one of error, grow_k, mst");
    }
    g->set_connect(it->second);
  }
  if (!a.scaling.empty()) {
    const std::vector<std::pair<std::string, kls::v1::SubmitJobRequest::Scaling>> choices = {
        {"none", kls::v1::SubmitJobRequest::NONE},
        {"zscore", kls::v1::SubmitJobRequest::ZSCORE},
        {"minmax", kls::v1::SubmitJobRequest::MINMAX}};
    auto it = std::find_if(choices.begin(), choices.end(), [&](const auto& c) { return c.first == a.scaling; });
    if (it == choices.end()) {
      return InvalidArgumentError("--scaling = '" + a.scaling + "' is not one of none, zscore, minmax");
    }
    r.set_scaling(it->second);
  }
  return OkStatus();
}

SubmitFlags::CvGroups SubmitFlags::CrossValidationGroups() const {
  CvGroups cv_groups;
  for (const Family& f : families_) {
    if (f.job_fields.count("cross_validation") == 0 || f.weight == nullptr) continue;
    const Flag* w = FlagOfField(f, f.weight);
    if (w == nullptr) continue;
    auto it = std::find_if(cv_groups.begin(), cv_groups.end(), [&](const auto& g) { return g.first == w->name; });
    if (it == cv_groups.end()) {
      cv_groups.push_back({w->name, {f.name}});
    } else {
      it->second.push_back(f.name);
    }
  }
  return cv_groups;
}

StatusOr<std::unique_ptr<pb::Message>> SubmitFlags::FamilyOptions(const Family& family, const CvGroups& cv_groups,
                                                                  bool* weight_auto) const {
  const Common& a = common_;
  std::unique_ptr<pb::Message> options(factory_->GetPrototype(family.options)->New());
  for (const Flag& flag : flags_) {
    if (!flag.given()) continue;
    auto it = flag.fields.find(family.name);
    const pb::FieldDescriptor* field = it == flag.fields.end() ? nullptr : it->second;
    if (flag.weight && Trim(flag.text) == "auto") {
      if (family.job_fields.count("cross_validation") == 0) {
        std::vector<std::string> groups;  // "fam_a (--gamma)", "fam_b and fam_c (--c)"
        for (const auto& [name, families] : cv_groups) groups.push_back(JoinWords(families, "and") + " (" + name + ")");
        return InvalidArgumentError(flag.name + " auto applies to " + JoinComma(groups));
      }
      if (field != nullptr && field == family.weight) {
        *weight_auto = true;  // the field stays unset: cross-validation chooses it
        continue;
      }
      if (field != nullptr) {
        return InvalidArgumentError(flag.name + " auto: the loss weight of --method " + family.name + " is " +
                                    FlagOfField(family, family.weight)->name);
      }
    }
    if (field == nullptr) return InvalidArgumentError(flag.name + " does not apply to --method " + a.method);
    KLS_RETURN_IF_ERROR(SetField(flag, field, options.get()));
  }
  return options;
}

Status SubmitFlags::CheckRequires(const Family& family, const pb::Message& options) const {
  const Common& a = common_;
  const pb::FieldDescriptor* requires_ext = pool_->FindExtensionByName("kls.v1.cli_requires");
  const pb::FieldDescriptor* value_alias_ext = pool_->FindExtensionByName("kls.v1.cli_value_alias");
  for (const Flag& flag : flags_) {
    if (!flag.given() || flag.fields.count(family.name) == 0) continue;
    const pb::FieldDescriptor* field = flag.fields.at(family.name);
    const std::string rule = StringOption(field->options(), requires_ext);
    const size_t eq = rule.find('=');
    if (eq == std::string::npos) continue;
    const pb::FieldDescriptor* other = family.options->FindFieldByName(rule.substr(0, eq));
    const std::string want = Normalized(rule.substr(eq + 1));
    bool holds = false;
    if (other != nullptr && other->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM) {
      const pb::EnumValueDescriptor* v = options.GetReflection()->GetEnum(options, other);
      holds = Normalized(v->name()) == want;
      for (const std::string& alias : CommaList(StringOption(v->options(), value_alias_ext))) {
        holds = holds || Normalized(alias) == want;
      }
    } else if (other != nullptr) {
      return InternalError(field->full_name() + ": (kls.v1.cli_requires) names a field that is not an enum");
    }
    if (!holds) {
      const Flag* other_flag = other ? FlagOfField(family, other) : nullptr;
      return InvalidArgumentError(flag.name + " does not apply to --method " + a.method + " unless " +
                                  (other_flag ? other_flag->name : rule.substr(0, eq)) + " " + rule.substr(eq + 1));
    }
  }
  return OkStatus();
}

Status SubmitFlags::SetJobFields(const Family& family, bool weight_auto, CvGroups cv_groups,
                                 kls::v1::SubmitJobRequest* out) const {
  const Common& a = common_;
  kls::v1::SubmitJobRequest& r = *out;
  // Cross-validation (--c auto / --gamma auto) and --warm-start.
  const bool cv_flags = a.cv_folds != 0 || a.cv_threads != -1 || a.cv_clusters != 0 || !a.cv_grid.empty();
  if (weight_auto) {
    kls::v1::CrossValidation* cv = r.mutable_cross_validation();
    if (a.cv_folds != 0) cv->set_folds(a.cv_folds);
    if (a.cv_threads != -1) cv->set_num_threads(a.cv_threads);
    if (a.cv_clusters != 0) cv->set_clusters(a.cv_clusters);
    if (!a.cv_grid.empty()) {
      std::stringstream in(a.cv_grid);
      std::string item;
      while (std::getline(in, item, ',')) {
        double v = 0;
        if (!ParseDouble(item, &v)) return InvalidArgumentError("--cv-grid: '" + item + "' is not a number");
        cv->add_grid(v);
      }
    }
  } else if (cv_flags) {
    // "need --c auto (fam_a: --gamma auto)": the most common spelling, then the others.
    std::sort(cv_groups.begin(), cv_groups.end(),
              [](const auto& x, const auto& y) { return x.second.size() > y.second.size(); });
    std::string need = cv_groups.empty() ? "--c auto" : cv_groups.front().first + " auto";
    std::vector<std::string> others;
    for (size_t i = 1; i < cv_groups.size(); ++i) {
      others.push_back(JoinComma(cv_groups[i].second) + ": " + cv_groups[i].first + " auto");
    }
    if (!others.empty()) need += " (" + JoinComma(others) + ")";
    return InvalidArgumentError("--cv-folds, --cv-grid, --cv-threads and --cv-clusters need " + need);
  }
  if (!a.warm_start.empty()) {
    if (family.job_fields.count("warm_start") == 0) {
      return InvalidArgumentError("--warm-start applies to " + FamiliesWith("warm_start"));
    }
    KLS_ASSIGN_OR_RETURN(const kls::v1::KernelRef ref, kls::ParseKernelRef(a.warm_start));
    if (!ref.alias().empty()) {
      return InvalidArgumentError("--warm-start = '" + a.warm_start + "': give NAME or NAME:VERSION, not an alias");
    }
    r.mutable_warm_start()->set_kernel_name(ref.name());
    r.mutable_warm_start()->set_version(ref.version());
  }

  if (a.no_baseline_guard) {
    if (family.job_fields.count("cross_validation") == 0) {
      return InvalidArgumentError("--no-baseline-guard applies to " + FamiliesWith("cross_validation"));
    }
    r.set_baseline_guard(false);
  }

  // Request-level flags the family does not use.
  for (const auto& [name, option] : a.graph_flags) {
    if (option->count() > 0 && family.job_fields.count("graph") == 0) {
      return InvalidArgumentError(name + " does not apply to --method " + a.method +
                                  " (it builds the graph its paper prescribes)");
    }
  }
  if (a.graph_connect_flag->count() > 0 && family.job_fields.count("graph.connect") == 0) {
    return InvalidArgumentError("--graph-connect does not apply to --method " + a.method + " (only " +
                                FamiliesWith("graph.connect") + " needs a connected graph)");
  }
  return OkStatus();
}

Status SubmitFlags::PutOptions(const Family& family, const pb::Message& options,
                               kls::v1::SubmitJobRequest* out) const {
  kls::v1::SubmitJobRequest& r = *out;
  const std::string bytes = options.SerializeAsString();
  if (family.packed) {
    r.mutable_family_options()->set_type_url(std::string(kTypeUrlPrefix) + "/" + family.options->full_name());
    r.mutable_family_options()->set_value(bytes);
  } else {
    const pb::FieldDescriptor* field = kls::v1::SubmitJobRequest::descriptor()->FindFieldByName(family.name);
    if (field == nullptr || field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      return InternalError("SubmitJobRequest has no message field " + family.name);
    }
    if (!r.GetReflection()->MutableMessage(&r, field)->ParseFromString(bytes)) {
      return InternalError(family.name + " options do not parse");
    }
  }
  return OkStatus();
}

StatusOr<std::string> SubmitFlags::RequestJson(const kls::v1::SubmitJobRequest& request) const {
  std::unique_ptr<pb::util::TypeResolver> resolver(
      pb::util::NewTypeResolverForDescriptorPool(kTypeUrlPrefix, pool_.get()));
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = pb::util::BinaryToJsonString(
      resolver.get(), std::string(kTypeUrlPrefix) + "/" + kls::v1::SubmitJobRequest::descriptor()->full_name(),
      request.SerializeAsString(), &json, options);
  if (!status.ok()) return InternalError("SubmitJobRequest as JSON: " + status.ToString());
  return json;
}

}  // namespace kls::cli
