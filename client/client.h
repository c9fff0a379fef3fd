// kls::Client: a small synchronous C++ client for a kls-server. Every call
// carries a deadline (ClientOptions::timeout_seconds) and returns a kls::Status
// whose code is the gRPC status code and whose message is the server's text,
// so `status.ToString()` reads "UNAVAILABLE: failed to connect to all addresses".
//
// Thread safety: one Client may be used from many threads at once (gRPC
// channels and stubs are thread-safe; the client holds no other state).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/common/status.h"
#include "core/data/constraints.h"
#include "core/data/dataset.h"
#include "core/model/learned_kernel.h"
#include "core/social/community.h"
#include "kls/v1/datasets.pb.h"
#include "kls/v1/jobs.pb.h"
#include "kls/v1/kernels.pb.h"
#include "kls/v1/queries.pb.h"
#include "kls/v1/service.pb.h"

namespace grpc {
class Channel;
}

namespace kls {

struct DataFileScan;  // core/data/row_reader.h

struct ClientOptions {
  /// HOST:PORT (any gRPC target string works, e.g. "dns:///kls.internal:50051").
  std::string target = "127.0.0.1:50051";
  /// Deadline for each call, in seconds.
  double timeout_seconds = 10.0;
  /// Largest message the client receives or sends, in MiB; keep it at least
  /// the server's max_message_mb (ServerInfo.max_message_bytes).
  int max_message_mb = 64;

  // ---- Security (README "Security") ----------------------------------------
  /// Bearer token sent with every call ("authorization: Bearer TOKEN");
  /// empty = none. Needed when the server has a tokens_file.
  std::string token;
  /// Connect with TLS. The server certificate is verified against
  /// tls_root_certs_pem, or the system's CAs when that is empty.
  bool tls = false;
  /// CA certificates (PEM) that sign the server's certificate.
  std::string tls_root_certs_pem;
  /// Client certificate chain and its private key (PEM), for servers that
  /// require mutual TLS; both or neither.
  std::string tls_cert_chain_pem;
  std::string tls_private_key_pem;
  /// Host name to verify the server certificate against instead of the
  /// target's host (e.g. the certificate says "kls.internal" but you dial an IP).
  std::string tls_server_name;

  /// Request id sent with every call (x-request-id metadata): the server logs
  /// it with the call and returns it; empty = the server makes one per call.
  /// 1..128 printable ASCII characters without spaces.
  std::string request_id;
};

/// Reads PEM files into `options` and turns TLS on. `ca_file` may be empty
/// (system CAs); `cert_file` and `key_file` are both set (mutual TLS) or both
/// empty. NOT_FOUND naming the file if one is unreadable, INVALID_ARGUMENT if
/// only one of cert/key is given.
Status LoadTlsFiles(const std::string& ca_file, const std::string& cert_file, const std::string& key_file,
                    ClientOptions* options);

/// Health of one service as grpc.health.v1 reports it.
enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };

/// "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN".
const char* ServingStatusName(ServingStatus status);

/// How UploadDataset encodes feature rows.
enum class FeatureEncoding {
  kAuto,    ///< sparse when fewer than half of the values are non-zero, else dense
  kDense,
  kSparse,
};

/// How far an upload has got; UploadOptions::on_progress receives one after
/// every message written.
struct UploadProgress {
  int64_t rows_sent = 0;
  int64_t num_points = 0;
  int64_t constraints_sent = 0;
  int64_t num_constraints = 0;
  int64_t bytes_sent = 0;  ///< serialized message bytes so far
};

struct UploadOptions {
  std::string name;                          ///< data-set name, optional: [A-Za-z0-9][A-Za-z0-9._-]{0,127} (core/common/names.h)
  FeatureEncoding encoding = FeatureEncoding::kAuto;
  int64_t chunk_bytes = int64_t{1} << 20;    ///< target size of one stream message (about 1 MiB)
  /// Set: append the constraints to this stored data set (a new data set
  /// sharing its features, DatasetHeader.base_dataset_id). UploadDataset's
  /// `data` is then not sent (pass an empty Dataset); the sizes come from
  /// Datasets.Get of the base.
  std::string base_dataset_id;
  /// Item attributes as CSV text (kls.v1.AttributesChunk's format), sent in
  /// pieces after the rows; empty = none (an append keeps the base's).
  std::string attributes_csv;
  /// A constraint protocol the server draws the pairs by (name empty = none;
  /// then `constraints` must be empty): DatasetHeader.protocol.
  kls::v1::ConstraintProtocol protocol;
  /// Called after every message the upload writes (not for social chunks).
  std::function<void(const UploadProgress&)> on_progress;
};

/// One feature row for Client::UploadRows.
struct FeatureRow {
  /// Empty: `values` holds all d features. Otherwise the 0-based, strictly
  /// ascending columns of `values` (the others are zero).
  std::vector<int> columns;
  std::vector<double> values;
  int label = 0;    ///< sent when the upload has labels
  std::string key;  ///< sent when the upload has item keys
};

/// Rows 0, 1, ..., n-1 of an upload, produced one at a time.
class FeatureRowSource {
 public:
  virtual ~FeatureRowSource() = default;
  /// Fills `row` with the next row. An error cancels the upload (nothing is
  /// stored) and is what UploadRows returns.
  virtual Status Next(FeatureRow* row) = 0;
};

/// What the upload header declares about the rows UploadRows sends.
struct UploadShape {
  int64_t num_points = 0;
  int dim = 0;
  bool has_labels = false;
  bool has_item_keys = false;
  /// Feature values != 0, for FeatureEncoding::kAuto (sparse when fewer than
  /// half of the n × d values are non-zero).
  int64_t nonzeros = 0;
};

/// Parses "NAME", "NAME:VERSION" or "NAME@ALIAS" into a KernelRef.
/// INVALID_ARGUMENT naming `text` for an empty name or a bad version.
StatusOr<kls::v1::KernelRef> ParseKernelRef(const std::string& text);

/// A kernel downloaded by Client::ExportKernel.
struct ExportedKernel {
  kls::v1::KernelInfo info;
  LearnedKernel::Embedding embedding;  ///< n × rank, row-major
};

class Client {
 public:
  /// Creates the channel; connecting happens lazily on the first call, so a
  /// server that is down shows up as UNAVAILABLE from that call.
  explicit Client(ClientOptions options);
  /// A client on an existing channel (e.g. a server's in-process channel);
  /// `options`' target, TLS and token are then unused.
  Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Admin.Echo: the payload back, byte for byte.
  StatusOr<std::string> Echo(const std::string& payload);

  /// Admin.GetServerInfo.
  StatusOr<kls::v1::ServerInfo> GetServerInfo();

  /// Admin.Backup: a snapshot of the server's embedded store into a new
  /// directory `name` (empty = a timestamped one) under its backup_dir.
  /// Waits for the whole backup: give a timeout to match the store's size.
  StatusOr<kls::v1::BackupResponse> Backup(const std::string& name = "");

  /// grpc.health.v1.Health.Check for `service` ("" = the whole server).
  /// NOT_FOUND if the server does not know the service.
  StatusOr<ServingStatus> CheckHealth(const std::string& service = "");

  // ---- Datasets -------------------------------------------------------------
  /// Datasets.Upload: streams `data` and `constraints` in chunks of about
  /// options.chunk_bytes. The whole upload shares one deadline of
  /// timeout_seconds × (1 + bytes / 16 MiB), so large sets are not cut short.
  /// With `social` (a community whose photo_visual rows are data.features),
  /// the upload is a social data set (DatasetHeader.social) and the photos'
  /// fields and relations follow as SocialChunk messages.
  StatusOr<kls::v1::DatasetInfo> UploadDataset(const Dataset& data, const PairwiseConstraints& constraints,
                                               const UploadOptions& options, const Community* social = nullptr);
  /// Datasets.Upload of `shape.num_points` rows pulled from `rows` one at a
  /// time: the same messages UploadDataset sends for a Dataset with those
  /// rows, without holding the feature matrix.
  StatusOr<kls::v1::DatasetInfo> UploadRows(const UploadShape& shape, FeatureRowSource& rows,
                                            const PairwiseConstraints& constraints, const UploadOptions& options);
  /// Datasets.Upload of a CSV / LIBSVM file in bounded memory: `scan` is the
  /// file's first pass (core/data/row_reader.h ScanDataFile); the file is read
  /// again and sent a chunk at a time. The data set stored is the one
  /// UploadDataset(ReadCsvFile / ReadLibsvmFile(scan.path), ...) stores. If the
  /// file changed since the scan, DATA_LOSS and nothing is stored.
  StatusOr<kls::v1::DatasetInfo> UploadDataFile(const DataFileScan& scan, const PairwiseConstraints& constraints,
                                                const UploadOptions& options);
  StatusOr<kls::v1::DatasetInfo> GetDataset(const std::string& id);
  /// Datasets.SetAttributes: replaces the item attributes of `dataset` (id,
  /// or name = the newest of that name) with `csv` (empty: removes them).
  StatusOr<kls::v1::DatasetInfo> SetAttributes(const std::string& dataset, const std::string& csv);
  StatusOr<std::vector<kls::v1::DatasetInfo>> ListDatasets();
  Status DeleteDataset(const std::string& id);

  // ---- Jobs -----------------------------------------------------------------
  StatusOr<kls::v1::Job> SubmitJob(const kls::v1::SubmitJobRequest& request);
  StatusOr<kls::v1::Job> GetJob(const std::string& id);
  StatusOr<kls::v1::ListJobsResponse> ListJobs(const kls::v1::ListJobsRequest& request);
  StatusOr<kls::v1::Job> CancelJob(const std::string& id);
  /// Jobs.Watch: calls `on_event` for every event (progress, state changes)
  /// and returns the last job snapshot once the job reaches a terminal state.
  /// No deadline unless `timeout_seconds` > 0 (a job may run for hours).
  StatusOr<kls::v1::Job> WatchJob(const std::string& id, const std::function<void(const kls::v1::Job&)>& on_event,
                                  double timeout_seconds = 0);

  // ---- Kernels --------------------------------------------------------------
  StatusOr<kls::v1::KernelInfo> GetKernel(const kls::v1::KernelRef& kernel);
  StatusOr<std::vector<kls::v1::KernelInfo>> ListKernels(const std::string& name = "");
  Status DeleteKernel(const std::string& name, int64_t version);
  StatusOr<kls::v1::KernelInfo> SetAlias(const std::string& name, const std::string& alias, int64_t version);
  /// Kernels.Export: the whole embedding, reassembled from its chunks.
  /// Deadline as for uploads (grows with n × rank).
  StatusOr<ExportedKernel> ExportKernel(const kls::v1::KernelRef& kernel);
  /// Kernels.Import: stores `embedding` (n × dim, row-major; K = V Vᵀ) as the
  /// next version of kernel `name`, streamed in chunks of about `chunk_bytes`.
  /// `item_keys` is empty or one unique, non-empty key per row. Deadline as
  /// for uploads (grows with n × dim). Nothing is stored on any error.
  StatusOr<kls::v1::KernelInfo> ImportKernel(const std::string& name, const LearnedKernel::Embedding& embedding,
                                             const std::vector<std::string>& item_keys = {},
                                             int64_t chunk_bytes = int64_t{1} << 20);

  // ---- Queries --------------------------------------------------------------
  /// K_ij for each pair.
  StatusOr<std::vector<double>> Similarity(const kls::v1::KernelRef& kernel,
                                           const std::vector<std::pair<int, int>>& pairs);
  /// Similarity with the whole request (pairs by index or by key).
  StatusOr<kls::v1::SimilarityResponse> Similarity(const kls::v1::SimilarityRequest& request);
  StatusOr<kls::v1::TopKResponse> TopK(const kls::v1::TopKRequest& request);
  StatusOr<kls::v1::EmbedResponse> Embed(const kls::v1::EmbedRequest& request);
  StatusOr<kls::v1::ReRankResponse> ReRank(const kls::v1::ReRankRequest& request);
  StatusOr<kls::v1::SimilarityResponse> SocialStrength(const kls::v1::SocialStrengthRequest& request);
  /// RecommendFriends (groups = false) or RecommendGroups.
  StatusOr<kls::v1::TopKResponse> Recommend(const kls::v1::RecommendRequest& request, bool groups);
  StatusOr<kls::v1::ClassifyResponse> Classify(const kls::v1::ClassifyRequest& request);
  /// Harmonic classification of a social model's users (§7.5.3).
  StatusOr<kls::v1::ClassifyUsersResponse> ClassifyUsers(const kls::v1::ClassifyUsersRequest& request);

  const ClientOptions& options() const { return options_; }

 private:
  void MakeStubs(std::shared_ptr<grpc::Channel> channel);
  struct Stubs;
  // The Upload stream behind UploadDataset / UploadRows / UploadDataFile.
  StatusOr<kls::v1::DatasetInfo> Upload(const UploadShape& shape, FeatureRowSource* rows,
                                        const PairwiseConstraints& constraints, const UploadOptions& options,
                                        const Community* social);
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace kls
