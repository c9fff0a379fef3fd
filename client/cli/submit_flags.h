// `kls submit`'s flags, built from the options messages' protobuf descriptors
// (proto/descriptor_set.h), so that a solver family or an options field added
// to the protos is a `--method` value or a flag with no change here.
//
// Families: each message field of SubmitJobRequest's `solver` oneof (but the
// google.protobuf.Any `family_options`), named by the field; and each message
// carrying the option (kls.v1.family) = "name", sent packed in
// SubmitJobRequest.family_options.
//
// Flags: `--` + field name with '_' → '-', plus the spellings of the field
// option (kls.v1.cli_alias); a field whose own spelling is one of submit's
// request-level flags (--method, ...) is given by its aliases only. Values
// by field type (numbers, bool true/false/1/0, enums by value name
// case-insensitively with '-' for '_' or by (kls.v1.cli_value_alias)); help
// from the fields' proto comments. A flag given that the chosen family's
// message does not have is an error, as is one whose (kls.v1.cli_requires)
// does not hold. The loss-weight field (`gamma` if the message has one, else
// `c`) also takes `auto`: cross-validation (SubmitJobRequest.cross_validation,
// --cv-*), for families whose (kls.v1.cli_job_fields) lists cross_validation.
#pragma once

#include <CLI/CLI.hpp>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "kls/v1/jobs.pb.h"

namespace google::protobuf {
class DescriptorPool;
class Descriptor;
class FieldDescriptor;
class DynamicMessageFactory;
}  // namespace google::protobuf

namespace kls::cli {

class SubmitFlags {
 public:
  struct Family {
    std::string name;                                 ///< --method value, Job.method
    const google::protobuf::Descriptor* options;      ///< its options message
    bool packed;                                      ///< sent in family_options (else a oneof field)
    std::set<std::string> job_fields;                 ///< (kls.v1.cli_job_fields)
    const google::protobuf::FieldDescriptor* weight;  ///< gamma, else c, else null
  };

  /// From a serialized FileDescriptorSet with source info (comments).
  static StatusOr<std::unique_ptr<SubmitFlags>> FromDescriptorSet(std::string_view bytes);
  /// From kls::proto::KlsDescriptorSet().
  static StatusOr<std::unique_ptr<SubmitFlags>> FromKlsProtos();
  ~SubmitFlags();

  const std::vector<Family>& families() const { return families_; }
  const Family* FindFamily(const std::string& name) const;

  /// Adds every `kls submit` flag but --watch / --print-request to `app`:
  /// --dataset, --kernel, --method, --priority, --deadline-seconds, the solver
  /// flags (the union over the families), the graph flags, --cv-*,
  /// --warm-start and --scaling.
  void AddFlags(CLI::App* app);

  /// The request the parsed flags describe; INVALID_ARGUMENT naming the flag
  /// for a flag that does not apply to the method or a bad value.
  StatusOr<kls::v1::SubmitJobRequest> BuildRequest() const;

  /// `request` as proto JSON (field names as in the .proto), family_options
  /// resolved through the descriptor set.
  StatusOr<std::string> RequestJson(const kls::v1::SubmitJobRequest& request) const;

 private:
  enum class Kind { kInt32, kInt64, kUint32, kUint64, kDouble, kBool, kText };
  struct Flag {
    std::string name;  ///< "--rank"
    Kind kind = Kind::kText;
    bool weight = false;  ///< some family's loss-weight field: takes "auto"
    std::map<std::string, const google::protobuf::FieldDescriptor*> fields;  ///< family → field
    std::vector<std::string> families;                                       ///< in family order, for the help text
    // The value (the member of `kind`), valid when option->count() > 0.
    int32_t i32 = 0;
    int64_t i64 = 0;
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    double d = 0;
    bool b = false;
    std::string text;
    CLI::Option* option = nullptr;
    bool given() const { return option != nullptr && option->count() > 0; }
  };

  SubmitFlags() = default;
  Status Discover();
  Status AddFamilyFields(const Family& family);
  std::string HelpText(const Flag& flag) const;
  Status SetField(const Flag& flag, const google::protobuf::FieldDescriptor* field, google::protobuf::Message* m) const;
  const Flag* FlagOfField(const Family& family, const google::protobuf::FieldDescriptor* field) const;
  std::string FamiliesWith(const std::string& job_field) const;
  // BuildRequest's phases, in order.
  /// Families with cross-validation, grouped by the spelling of their loss
  /// weight, e.g. [("--gamma", {fam_a}), ("--c", {fam_b, fam_c})].
  using CvGroups = std::vector<std::pair<std::string, std::vector<std::string>>>;
  Status SetGraphAndScaling(kls::v1::SubmitJobRequest* r) const;
  CvGroups CrossValidationGroups() const;
  /// The options message of `family`, field by field from the flags given;
  /// *weight_auto: the loss weight was given as "auto" (cross-validation).
  StatusOr<std::unique_ptr<google::protobuf::Message>> FamilyOptions(const Family& family, const CvGroups& cv_groups,
                                                                     bool* weight_auto) const;
  /// (kls.v1.cli_requires) "FIELD=VALUE": that field must hold that value.
  Status CheckRequires(const Family& family, const google::protobuf::Message& options) const;
  /// Cross-validation, --warm-start, --no-baseline-guard, and the
  /// request-level flags the family does not use.
  Status SetJobFields(const Family& family, bool weight_auto, CvGroups cv_groups, kls::v1::SubmitJobRequest* r) const;
  /// The options into family_options (packed families) or the family's own field.
  Status PutOptions(const Family& family, const google::protobuf::Message& options,
                    kls::v1::SubmitJobRequest* r) const;

  std::unique_ptr<google::protobuf::DescriptorPool> pool_;
  std::unique_ptr<google::protobuf::DynamicMessageFactory> factory_;
  std::vector<std::string> file_names_;  ///< the set's files, in order
  std::vector<Family> families_;
  std::deque<Flag> flags_;  ///< stable addresses: CLI11 writes into them
  std::map<std::string, Flag*> by_name_;
  Status setup_error_;  ///< a conflict among the annotations, reported by BuildRequest

  // Request-level flags.
  struct Common {
    std::string dataset, kernel, method;
    int priority = 0;
    double deadline_seconds = 0;
    int graph_k = 0;
    double graph_sigma = 0, graph_delta = 0;
    std::string graph_weight, graph_connect, graph_search, scaling;
    int cv_folds = 0, cv_threads = -1, cv_clusters = 0;  // cv_threads -1: not given
    std::string cv_grid, warm_start;
    bool no_baseline_guard = false;
    std::map<std::string, CLI::Option*> graph_flags;  // --graph-k ... (not --graph-connect)
    CLI::Option* graph_connect_flag = nullptr;
  } common_;
};

}  // namespace kls::cli
