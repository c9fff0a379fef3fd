#include "client/client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>

#include "client/grpc_status.h"
#include "core/data/row_reader.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kls/v1/datasets.grpc.pb.h"
#include "kls/v1/jobs.grpc.pb.h"
#include "kls/v1/kernels.grpc.pb.h"
#include "kls/v1/queries.grpc.pb.h"
#include "kls/v1/service.grpc.pb.h"

namespace kls {

struct Client::Stubs {
  std::unique_ptr<kls::v1::Admin::Stub> admin;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
  std::unique_ptr<kls::v1::Datasets::Stub> datasets;
  std::unique_ptr<kls::v1::Jobs::Stub> jobs;
  std::unique_ptr<kls::v1::Kernels::Stub> kernels;
  std::unique_ptr<kls::v1::Queries::Stub> queries;
};

namespace {

// Every call's context: its deadline (none when seconds ≤ 0) and the
// client's request id (x-request-id metadata) when one is set.
void SetCallOptions(const ClientOptions& options, double seconds, grpc::ClientContext* context) {
  if (seconds > 0) {
    const auto timeout = std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::duration<double>(seconds));
    context->set_deadline(std::chrono::system_clock::now() + timeout);
  }
  if (!options.request_id.empty()) context->AddMetadata("x-request-id", options.request_id);
}

void SetDeadline(const ClientOptions& options, grpc::ClientContext* context) {
  SetCallOptions(options, options.timeout_seconds, context);
}

// Bulk transfers get the per-call timeout once per 16 MiB moved.
double BulkTimeoutSeconds(const ClientOptions& options, double bytes) {
  return options.timeout_seconds * (1.0 + bytes / double(16 << 20));
}

// One unary call with the standard deadline: Status or the response.
template <typename Response, typename Call>
StatusOr<Response> Unary(const ClientOptions& options, Call&& call) {
  grpc::ClientContext context;
  SetDeadline(options, &context);
  Response response;
  const grpc::Status status = call(&context, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

// Adds the bearer token to every call made on the channel, including calls
// made through stubs this file does not know about.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;  // lives as long as the channel (which owns the factory)
};

StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFoundError(std::string("cannot read ") + what + " '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  if (text.str().find("-----BEGIN") == std::string::npos) {
    return InvalidArgumentError(std::string(what) + " '" + path + "' is not a PEM file");
  }
  return text.str();
}


}  // namespace

StatusOr<kls::v1::KernelRef> ParseKernelRef(const std::string& text) {
  kls::v1::KernelRef ref;
  const size_t at = text.find('@');
  const size_t colon = text.rfind(':');
  if (at != std::string::npos) {
    ref.set_name(text.substr(0, at));
    ref.set_alias(text.substr(at + 1));
    if (ref.alias().empty()) return InvalidArgumentError("kernel '" + text + "': empty alias after '@'");
  } else if (colon != std::string::npos) {
    ref.set_name(text.substr(0, colon));
    const std::string v = text.substr(colon + 1);
    int64_t version = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), version);
    if (ec != std::errc() || ptr != v.data() + v.size() || version < 1) {
      return InvalidArgumentError("kernel '" + text + "': version '" + v + "' is not a positive integer");
    }
    ref.set_version(version);
  } else {
    ref.set_name(text);
  }
  if (ref.name().empty()) {
    return InvalidArgumentError("kernel '" + text + "': expected NAME, NAME:VERSION or NAME@ALIAS");
  }
  return ref;
}

Status LoadTlsFiles(const std::string& ca_file, const std::string& cert_file, const std::string& key_file,
                    ClientOptions* options) {
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgumentError("a client certificate needs its key: give both --tls-cert and --tls-key (got " +
                                std::string(cert_file.empty() ? "only --tls-key" : "only --tls-cert") + ")");
  }
  if (!ca_file.empty()) {
    KLS_ASSIGN_OR_RETURN(options->tls_root_certs_pem, ReadPem(ca_file, "--tls-ca file"));
  }
  if (!cert_file.empty()) {
    KLS_ASSIGN_OR_RETURN(options->tls_cert_chain_pem, ReadPem(cert_file, "--tls-cert file"));
    KLS_ASSIGN_OR_RETURN(options->tls_private_key_pem, ReadPem(key_file, "--tls-key file"));
  }
  options->tls = true;
  return OkStatus();
}

const char* ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kUnknown: return "UNKNOWN";
    case ServingStatus::kServing: return "SERVING";
    case ServingStatus::kNotServing: return "NOT_SERVING";
    case ServingStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

Client::Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)), stubs_(std::make_unique<Stubs>()) {
  MakeStubs(std::move(channel));
}

void Client::MakeStubs(std::shared_ptr<grpc::Channel> channel) {
  channel_ = std::move(channel);
  stubs_->admin = kls::v1::Admin::NewStub(channel_);
  stubs_->health = grpc::health::v1::Health::NewStub(channel_);
  stubs_->datasets = kls::v1::Datasets::NewStub(channel_);
  stubs_->jobs = kls::v1::Jobs::NewStub(channel_);
  stubs_->kernels = kls::v1::Kernels::NewStub(channel_);
  stubs_->queries = kls::v1::Queries::NewStub(channel_);
}

Client::Client(ClientOptions options) : options_(std::move(options)), stubs_(std::make_unique<Stubs>()) {
  grpc::ChannelArguments args;
  // gRPC sizes are int; clamp so a careless option cannot overflow.
  const int max_bytes = std::clamp(options_.max_message_mb, 1, 2047) * 1024 * 1024;
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options_.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls_root_certs_pem;
    ssl.pem_cert_chain = options_.tls_cert_chain_pem;
    ssl.pem_private_key = options_.tls_private_key_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!options_.tls_server_name.empty()) args.SetSslTargetNameOverride(options_.tls_server_name);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!options_.token.empty()) interceptors.push_back(std::make_unique<TokenInterceptorFactory>(options_.token));
  MakeStubs(grpc::experimental::CreateCustomChannelWithInterceptors(options_.target, credentials, args,
                                                                     std::move(interceptors)));
}

Client::~Client() = default;

StatusOr<std::string> Client::Echo(const std::string& payload) {
  grpc::ClientContext context;
  SetDeadline(options_, &context);
  kls::v1::EchoRequest request;
  request.set_payload(payload);
  kls::v1::EchoResponse response;
  const grpc::Status status = stubs_->admin->Echo(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::move(*response.mutable_payload());
}

StatusOr<kls::v1::BackupResponse> Client::Backup(const std::string& name) {
  grpc::ClientContext context;
  SetDeadline(options_, &context);
  kls::v1::BackupRequest request;
  request.set_name(name);
  kls::v1::BackupResponse response;
  const grpc::Status status = stubs_->admin->Backup(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

StatusOr<kls::v1::ServerInfo> Client::GetServerInfo() {
  grpc::ClientContext context;
  SetDeadline(options_, &context);
  kls::v1::ServerInfo info;
  const grpc::Status status = stubs_->admin->GetServerInfo(&context, kls::v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

StatusOr<ServingStatus> Client::CheckHealth(const std::string& service) {
  grpc::ClientContext context;
  SetDeadline(options_, &context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stubs_->health->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING: return ServingStatus::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING: return ServingStatus::kNotServing;
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN: return ServingStatus::kServiceUnknown;
    default: return ServingStatus::kUnknown;
  }
}

// ---- Datasets ---------------------------------------------------------------

namespace {

// The rows of an in-memory Dataset.
class DatasetRowSource final : public FeatureRowSource {
 public:
  explicit DatasetRowSource(const Dataset& data) : data_(data) {}
  Status Next(FeatureRow* row) override {
    const int d = data_.dim();
    row->columns.clear();
    row->values.resize(d);
    for (int col = 0; col < d; ++col) row->values[col] = data_.features(next_, col);
    if (!data_.labels.empty()) row->label = data_.labels[next_];
    if (!data_.item_keys.empty()) row->key = data_.item_keys[next_];
    ++next_;
    return OkStatus();
  }

 private:
  const Dataset& data_;
  int next_ = 0;
};

// The rows of a data file, read again after ScanDataFile; checks that they are
// still the rows the scan saw (sizes, labels).
class FileRowSource final : public FeatureRowSource {
 public:
  FileRowSource(const DataFileScan& scan, RowReader reader) : scan_(scan), reader_(std::move(reader)) {}
  Status Next(FeatureRow* row) override {
    KLS_ASSIGN_OR_RETURN(const bool more, reader_.Next(&row_));
    if (!more || row_.index >= scan_.num_points) return Changed("it has " + std::to_string(reader_.rows()) + " rows");
    if (reader_.dim() > scan_.dim) return Changed("a row has more than " + std::to_string(scan_.dim) + " features");
    if (scan_.has_labels) {
      // LIBSVM ±1 labels map to 0/1 only once all are known: compare raw labels too.
      const long long want = scan_.labels[row_.index];
      const bool same = reader_.format() == DataFormat::kCsv ? row_.label == want
                        : row_.label == want || (row_.label == -1 && want == 0) || (row_.label == 1 && want == 1);
      if (!same) return Changed("line " + std::to_string(row_.line) + " has another label");
      row->label = static_cast<int>(want);
    }
    row->columns.swap(row_.columns);
    row->values.swap(row_.values);
    row->key.swap(row_.key);
    if (row_.index + 1 == scan_.num_points) {
      // The last row: the file must end here (and pass the end-of-input checks).
      DataRow extra;
      KLS_ASSIGN_OR_RETURN(const bool more_rows, reader_.Next(&extra));
      if (more_rows) return Changed("it has more than " + std::to_string(scan_.num_points) + " rows");
      if (reader_.dim() != scan_.dim) return Changed("it has " + std::to_string(reader_.dim()) + " features");
    }
    return OkStatus();
  }

 private:
  Status Changed(const std::string& what) const {
    return DataLossError(scan_.path + " changed during the upload: " + what);
  }
  const DataFileScan& scan_;
  RowReader reader_;
  DataRow row_;
};

}  // namespace

StatusOr<kls::v1::DatasetInfo> Client::UploadDataset(const Dataset& data, const PairwiseConstraints& constraints,
                                                     const UploadOptions& upload, const Community* social) {
  UploadShape shape;
  shape.num_points = data.num_points();
  shape.dim = data.dim();
  shape.has_labels = !data.labels.empty();
  shape.has_item_keys = !data.item_keys.empty();
  shape.nonzeros = (data.features.array() != 0.0).count();
  DatasetRowSource rows(data);
  return Upload(shape, &rows, constraints, upload, social);
}

StatusOr<kls::v1::DatasetInfo> Client::UploadRows(const UploadShape& shape, FeatureRowSource& rows,
                                                  const PairwiseConstraints& constraints, const UploadOptions& options) {
  if (!options.base_dataset_id.empty()) {
    return InvalidArgumentError("UploadRows sends feature rows; an append (base_dataset_id) sends none");
  }
  return Upload(shape, &rows, constraints, options, nullptr);
}

StatusOr<kls::v1::DatasetInfo> Client::UploadDataFile(const DataFileScan& scan, const PairwiseConstraints& constraints,
                                                      const UploadOptions& options) {
  KLS_ASSIGN_OR_RETURN(RowReader reader, RowReader::OpenFile(scan.path, scan.format, scan.num_features, scan.options));
  if (reader.has_labels() != scan.has_labels || reader.has_item_keys() != scan.has_item_keys ||
      (scan.format == DataFormat::kCsv && reader.dim() != scan.dim)) {
    return DataLossError(scan.path + " changed since it was scanned: another header");
  }
  FileRowSource rows(scan, std::move(reader));
  UploadShape shape;
  shape.num_points = scan.num_points;
  shape.dim = scan.dim;
  shape.has_labels = scan.has_labels;
  shape.has_item_keys = scan.has_item_keys;
  shape.nonzeros = scan.nonzeros;
  return UploadRows(shape, rows, constraints, options);
}

namespace {

// Appends one feature row to `chunk` in the sparse or the dense encoding (a
// sparse row is scattered into `dense` first); returns its estimated bytes.
int64_t AddFeatureRow(const FeatureRow& r, const UploadShape& shape, int d, bool sparse, kls::v1::FeatureChunk* chunk,
                      std::vector<double>* dense) {
  int64_t bytes = 0;
  const bool listed = !r.columns.empty() || static_cast<int>(r.values.size()) != d;
  if (sparse) {
    kls::v1::SparseRow* s = chunk->add_sparse_rows();
    for (size_t t = 0; t < r.values.size(); ++t) {
      if (r.values[t] != 0.0) {
        s->add_indices(listed ? r.columns[t] : static_cast<int>(t));
        s->add_values(r.values[t]);
      }
    }
    bytes += 12 * int64_t{s->indices_size()} + 8;
  } else {
    if (listed) {
      dense->assign(d, 0.0);
      for (size_t t = 0; t < r.columns.size(); ++t) (*dense)[r.columns[t]] = r.values[t];
      chunk->mutable_values()->Add(dense->begin(), dense->end());
    } else {
      chunk->mutable_values()->Add(r.values.begin(), r.values.end());
    }
    bytes += 8 * int64_t{d};
  }
  if (shape.has_labels) chunk->add_labels(r.label);
  if (shape.has_item_keys) {
    chunk->add_item_keys(r.key);
    bytes += static_cast<int64_t>(r.key.size()) + 2;
  }
  return bytes;
}

// The social records of an upload (n photos) as SocialChunk messages, built
// in `message` and passed to `send`; false when a send failed (the server
// ended the call).
bool WriteSocialChunks(const Community& social, int n, int64_t budget, kls::v1::UploadDatasetRequest* message,
                       const std::function<bool(const kls::v1::UploadDatasetRequest&)>& send) {
  // Per-photo fields, then each relation, in chunks of about `budget` bytes.
  const int per_chunk = static_cast<int>(std::max<int64_t>(1, budget / 24));
  for (int first = 0; first < n; first += per_chunk) {
    message->Clear();
    kls::v1::SocialChunk* chunk = message->mutable_social();
    chunk->set_first_photo(first);
    for (int p = first; p < std::min(n, first + per_chunk); ++p) {
      chunk->add_owner(social.photo_owner[p]);
      chunk->add_day(social.photo_day[p]);
      chunk->add_latitude(social.photo_latitude[p]);
      chunk->add_longitude(social.photo_longitude[p]);
    }
    if (!send(*message)) return false;
  }
  std::vector<std::pair<int, int>> tags, comments, contacts, members, faves;
  for (int k = 0; k < social.photo_tags.outerSize(); ++k)
    for (Eigen::SparseMatrix<double>::InnerIterator it(social.photo_tags, k); it; ++it)
      tags.emplace_back(static_cast<int>(it.row()), static_cast<int>(it.col()));
  for (const Comment& c : social.comments) comments.emplace_back(c.photo, c.author);
  for (int u = 0; u < social.num_users; ++u) {
    for (int v : social.contacts[u])
      if (u < v) contacts.emplace_back(u, v);
    for (int g : social.groups[u]) members.emplace_back(u, g);
  }
  faves = social.favourites;
  using Adder = void (*)(kls::v1::SocialChunk*, int, int);
  const std::pair<const std::vector<std::pair<int, int>>*, Adder> relations[] = {
      {&tags, [](kls::v1::SocialChunk* c, int a, int b) { c->add_tag_photo(a), c->add_tag_id(b); }},
      {&comments, [](kls::v1::SocialChunk* c, int a, int b) { c->add_comment_photo(a), c->add_comment_author(b); }},
      {&contacts, [](kls::v1::SocialChunk* c, int a, int b) { c->add_contact_a(a), c->add_contact_b(b); }},
      {&members, [](kls::v1::SocialChunk* c, int a, int b) { c->add_member_user(a), c->add_member_group(b); }},
      {&faves, [](kls::v1::SocialChunk* c, int a, int b) { c->add_fave_user(a), c->add_fave_photo(b); }},
  };
  const size_t pairs_per = static_cast<size_t>(std::max<int64_t>(1, budget / 8));
  for (const auto& [list, add] : relations) {
    for (size_t first = 0; first < list->size(); first += pairs_per) {
      message->Clear();
      kls::v1::SocialChunk* chunk = message->mutable_social();
      chunk->set_first_photo(n);  // no photo fields in this chunk
      for (size_t t = first; t < std::min(list->size(), first + pairs_per); ++t) add(chunk, (*list)[t].first, (*list)[t].second);
      if (!send(*message)) return false;
    }
  }
  return true;
}

}  // namespace

StatusOr<kls::v1::DatasetInfo> Client::Upload(const UploadShape& shape, FeatureRowSource* rows,
                                              const PairwiseConstraints& constraints, const UploadOptions& upload,
                                              const Community* social) {
  int n = static_cast<int>(shape.num_points);
  int d = shape.dim;
  const bool append = !upload.base_dataset_id.empty();
  if (append) {
    KLS_ASSIGN_OR_RETURN(const kls::v1::DatasetInfo base, GetDataset(upload.base_dataset_id));
    n = static_cast<int>(base.num_points());
    d = base.dim();
  }
  grpc::ClientContext context;
  SetCallOptions(options_, BulkTimeoutSeconds(options_, 8.0 * n * d + 12.0 * constraints.size()), &context);
  kls::v1::DatasetInfo info;
  std::unique_ptr<grpc::ClientWriter<kls::v1::UploadDatasetRequest>> writer(
      stubs_->datasets->Upload(&context, &info));

  // A failed Write means the server already ended the call: Finish() says why.
  auto finish = [&]() -> StatusOr<kls::v1::DatasetInfo> {
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (!status.ok()) return FromGrpcStatus(status);
    return info;
  };
  // A local error mid-stream: cancel the call so the server stores nothing.
  auto abandon = [&](const Status& error) -> StatusOr<kls::v1::DatasetInfo> {
    context.TryCancel();
    writer->Finish();
    return error;
  };

  UploadProgress progress;
  progress.num_points = append ? 0 : n;
  progress.num_constraints = constraints.size();
  auto write = [&](const kls::v1::UploadDatasetRequest& m) {
    progress.bytes_sent += static_cast<int64_t>(m.ByteSizeLong());
    const bool ok = writer->Write(m);
    if (ok && upload.on_progress && !m.has_social()) upload.on_progress(progress);
    return ok;
  };

  kls::v1::UploadDatasetRequest message;
  kls::v1::DatasetHeader* header = message.mutable_header();
  header->set_name(upload.name);
  header->set_num_points(n);
  header->set_dim(d);
  header->set_has_labels(shape.has_labels);
  header->set_has_item_keys(shape.has_item_keys);
  header->set_num_constraints(constraints.size());
  header->set_base_dataset_id(upload.base_dataset_id);
  if (!upload.protocol.name().empty()) *header->mutable_protocol() = upload.protocol;
  if (social) {
    if (social->num_photos() != n) {
      return InvalidArgumentError("social data has " + std::to_string(social->num_photos()) + " photos but " +
                                  std::to_string(n) + " feature rows");
    }
    header->mutable_social()->set_num_users(social->num_users);
    header->mutable_social()->set_num_groups(social->num_groups);
    header->mutable_social()->set_vocabulary(static_cast<int>(std::max<Eigen::Index>(1, social->photo_tags.cols())));
  }
  if (!write(message)) return finish();

  const bool sparse = upload.encoding == FeatureEncoding::kAuto
                          ? 2 * shape.nonzeros < shape.num_points * int64_t{shape.dim}
                          : upload.encoding == FeatureEncoding::kSparse;
  const int64_t budget = std::max<int64_t>(upload.chunk_bytes, 1);
  int row = append ? n : 0;  // an append sends no feature rows
  FeatureRow r;
  std::vector<double> dense;  // a sparse row scattered for the dense encoding
  while (row < n) {
    message.Clear();
    kls::v1::FeatureChunk* chunk = message.mutable_features();
    chunk->set_first_row(row);
    int64_t bytes = 0;
    while (row < n && (bytes == 0 || bytes < budget)) {
      if (Status next = rows->Next(&r); !next.ok()) return abandon(next);
      bytes += AddFeatureRow(r, shape, d, sparse, chunk, &dense);
      ++row;
    }
    progress.rows_sent = row;
    if (!write(message)) return finish();
  }

  const int64_t pairs_per_chunk = std::max<int64_t>(1, budget / 12);
  for (int first = 0; first < constraints.size(); first += static_cast<int>(pairs_per_chunk)) {
    message.Clear();
    kls::v1::ConstraintChunk* chunk = message.mutable_constraints();
    const int last = static_cast<int>(std::min<int64_t>(constraints.size(), first + pairs_per_chunk));
    for (int t = first; t < last; ++t) {
      const Pair& p = constraints.pairs[t];
      chunk->add_i(p.i);
      chunk->add_j(p.j);
      chunk->add_kind(static_cast<int>(p.kind));
    }
    progress.constraints_sent = last;
    if (!write(message)) return finish();
  }
  if (social) {
    const auto send = [&](const kls::v1::UploadDatasetRequest& m) { return writer->Write(m); };
    if (!WriteSocialChunks(*social, n, budget, &message, send)) return finish();
  }
  for (size_t first = 0; first < upload.attributes_csv.size(); first += static_cast<size_t>(budget)) {
    message.Clear();
    message.mutable_attributes()->set_csv(upload.attributes_csv.substr(first, static_cast<size_t>(budget)));
    if (!write(message)) return finish();
  }
  return finish();
}

StatusOr<kls::v1::DatasetInfo> Client::SetAttributes(const std::string& dataset, const std::string& csv) {
  grpc::ClientContext context;
  SetCallOptions(options_, BulkTimeoutSeconds(options_, static_cast<double>(csv.size())), &context);
  kls::v1::DatasetInfo info;
  std::unique_ptr<grpc::ClientWriter<kls::v1::SetAttributesRequest>> writer(
      stubs_->datasets->SetAttributes(&context, &info));
  constexpr size_t kPiece = size_t{1} << 20;
  size_t first = 0;
  do {
    kls::v1::SetAttributesRequest message;
    if (first == 0) message.set_dataset_id(dataset);
    message.mutable_attributes()->set_csv(csv.substr(first, kPiece));
    if (!writer->Write(message)) break;  // the server ended the call: Finish says why
    first += kPiece;
  } while (first < csv.size());
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

StatusOr<kls::v1::DatasetInfo> Client::GetDataset(const std::string& id) {
  kls::v1::GetDatasetRequest request;
  request.set_id(id);
  return Unary<kls::v1::DatasetInfo>(options_, [&](grpc::ClientContext* c, kls::v1::DatasetInfo* r) {
    return stubs_->datasets->Get(c, request, r);
  });
}

StatusOr<std::vector<kls::v1::DatasetInfo>> Client::ListDatasets() {
  auto response = Unary<kls::v1::ListDatasetsResponse>(
      options_, [&](grpc::ClientContext* c, kls::v1::ListDatasetsResponse* r) {
        return stubs_->datasets->List(c, kls::v1::ListDatasetsRequest(), r);
      });
  if (!response.ok()) return response.status();
  return std::vector<kls::v1::DatasetInfo>(response->datasets().begin(), response->datasets().end());
}

Status Client::DeleteDataset(const std::string& id) {
  kls::v1::DeleteDatasetRequest request;
  request.set_id(id);
  return Unary<kls::v1::DeleteDatasetResponse>(options_, [&](grpc::ClientContext* c,
                                                              kls::v1::DeleteDatasetResponse* r) {
           return stubs_->datasets->Delete(c, request, r);
         }).status();
}

// ---- Jobs -------------------------------------------------------------------

StatusOr<kls::v1::Job> Client::SubmitJob(const kls::v1::SubmitJobRequest& request) {
  return Unary<kls::v1::Job>(options_, [&](grpc::ClientContext* c, kls::v1::Job* r) {
    return stubs_->jobs->Submit(c, request, r);
  });
}

StatusOr<kls::v1::Job> Client::GetJob(const std::string& id) {
  kls::v1::GetJobRequest request;
  request.set_id(id);
  return Unary<kls::v1::Job>(options_, [&](grpc::ClientContext* c, kls::v1::Job* r) {
    return stubs_->jobs->Get(c, request, r);
  });
}

StatusOr<kls::v1::ListJobsResponse> Client::ListJobs(const kls::v1::ListJobsRequest& request) {
  return Unary<kls::v1::ListJobsResponse>(options_, [&](grpc::ClientContext* c, kls::v1::ListJobsResponse* r) {
    return stubs_->jobs->List(c, request, r);
  });
}

StatusOr<kls::v1::Job> Client::CancelJob(const std::string& id) {
  kls::v1::CancelJobRequest request;
  request.set_id(id);
  return Unary<kls::v1::Job>(options_, [&](grpc::ClientContext* c, kls::v1::Job* r) {
    return stubs_->jobs->Cancel(c, request, r);
  });
}

StatusOr<kls::v1::Job> Client::WatchJob(const std::string& id,
                                        const std::function<void(const kls::v1::Job&)>& on_event,
                                        double timeout_seconds) {
  grpc::ClientContext context;
  SetCallOptions(options_, timeout_seconds, &context);
  kls::v1::WatchJobRequest request;
  request.set_id(id);
  std::unique_ptr<grpc::ClientReader<kls::v1::JobEvent>> reader(stubs_->jobs->Watch(&context, request));
  kls::v1::JobEvent event;
  kls::v1::Job last;
  bool any = false;
  while (reader->Read(&event)) {
    last = event.job();
    any = true;
    if (on_event) on_event(last);
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!any) return GetJob(id);  // the stream ended without an event: ask once
  return last;
}

// ---- Kernels ----------------------------------------------------------------

StatusOr<kls::v1::KernelInfo> Client::GetKernel(const kls::v1::KernelRef& kernel) {
  kls::v1::GetKernelRequest request;
  *request.mutable_kernel() = kernel;
  return Unary<kls::v1::KernelInfo>(options_, [&](grpc::ClientContext* c, kls::v1::KernelInfo* r) {
    return stubs_->kernels->Get(c, request, r);
  });
}

StatusOr<std::vector<kls::v1::KernelInfo>> Client::ListKernels(const std::string& name) {
  kls::v1::ListKernelsRequest request;
  request.set_name(name);
  auto response = Unary<kls::v1::ListKernelsResponse>(options_, [&](grpc::ClientContext* c,
                                                                     kls::v1::ListKernelsResponse* r) {
    return stubs_->kernels->List(c, request, r);
  });
  if (!response.ok()) return response.status();
  return std::vector<kls::v1::KernelInfo>(response->kernels().begin(), response->kernels().end());
}

Status Client::DeleteKernel(const std::string& name, int64_t version) {
  kls::v1::DeleteKernelRequest request;
  request.set_name(name);
  request.set_version(version);
  return Unary<kls::v1::DeleteKernelResponse>(options_, [&](grpc::ClientContext* c,
                                                             kls::v1::DeleteKernelResponse* r) {
           return stubs_->kernels->Delete(c, request, r);
         }).status();
}

StatusOr<kls::v1::KernelInfo> Client::SetAlias(const std::string& name, const std::string& alias, int64_t version) {
  kls::v1::SetAliasRequest request;
  request.set_name(name);
  request.set_alias(alias);
  request.set_version(version);
  return Unary<kls::v1::KernelInfo>(options_, [&](grpc::ClientContext* c, kls::v1::KernelInfo* r) {
    return stubs_->kernels->SetAlias(c, request, r);
  });
}

StatusOr<ExportedKernel> Client::ExportKernel(const kls::v1::KernelRef& kernel) {
  // The size is unknown until the first chunk: look it up for the deadline.
  KLS_ASSIGN_OR_RETURN(kls::v1::KernelInfo info, GetKernel(kernel));
  grpc::ClientContext context;
  SetCallOptions(options_, BulkTimeoutSeconds(options_, 8.0 * info.num_points() * info.rank()), &context);
  kls::v1::ExportKernelRequest request;
  *request.mutable_kernel() = kernel;
  std::unique_ptr<grpc::ClientReader<kls::v1::ExportKernelChunk>> reader(stubs_->kernels->Export(&context, request));

  ExportedKernel out;
  kls::v1::ExportKernelChunk chunk;
  bool have_info = false;
  int64_t filled = 0;  // values received so far
  while (reader->Read(&chunk)) {
    if (!have_info) {
      if (!chunk.has_info()) {
        context.TryCancel();
        reader->Finish();
        return DataLossError("export: the first chunk carries no kernel info");
      }
      out.info = chunk.info();
      out.embedding.resize(out.info.num_points(), out.info.rank());
      have_info = true;
    }
    const int64_t offset = chunk.first_row() * int64_t{out.info.rank()};
    if (offset != filled || offset + chunk.values_size() > out.embedding.size()) {
      context.TryCancel();
      reader->Finish();
      return DataLossError("export: chunk at row " + std::to_string(chunk.first_row()) + " is out of sequence");
    }
    std::copy(chunk.values().begin(), chunk.values().end(), out.embedding.data() + offset);
    filled += chunk.values_size();
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!have_info || filled != out.embedding.size()) {
    return DataLossError("export ended after " + std::to_string(filled) + " of " +
                         std::to_string(out.embedding.size()) + " values");
  }
  return out;
}

StatusOr<kls::v1::KernelInfo> Client::ImportKernel(const std::string& name, const LearnedKernel::Embedding& embedding,
                                                   const std::vector<std::string>& item_keys, int64_t chunk_bytes) {
  const int64_t n = embedding.rows();
  const int64_t dim = embedding.cols();
  if (!item_keys.empty() && static_cast<int64_t>(item_keys.size()) != n) {
    return InvalidArgumentError("item_keys has " + std::to_string(item_keys.size()) + " keys for " +
                                std::to_string(n) + " rows; give one per row or none");
  }
  if (chunk_bytes < 1) return InvalidArgumentError("chunk_bytes = " + std::to_string(chunk_bytes) + " must be >= 1");
  grpc::ClientContext context;
  SetCallOptions(options_, BulkTimeoutSeconds(options_, 8.0 * double(n) * double(dim)), &context);
  kls::v1::KernelInfo info;
  std::unique_ptr<grpc::ClientWriter<kls::v1::ImportKernelChunk>> writer(stubs_->kernels->Import(&context, &info));

  kls::v1::ImportKernelChunk message;
  kls::v1::ImportKernelHeader* header = message.mutable_header();
  header->set_name(name);
  header->set_num_points(n);
  header->set_dim(static_cast<int32_t>(dim));
  header->set_has_item_keys(!item_keys.empty());
  bool open = writer->Write(message);
  const int64_t rows_per_chunk = std::max<int64_t>(1, chunk_bytes / std::max<int64_t>(1, 8 * dim));
  for (int64_t first = 0; open && first < n; first += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, n - first);
    message.Clear();
    kls::v1::ImportKernelRows* chunk = message.mutable_rows();
    chunk->set_first_row(first);
    chunk->mutable_values()->Add(embedding.data() + first * dim, embedding.data() + (first + rows) * dim);
    if (!item_keys.empty()) {
      for (int64_t r = first; r < first + rows; ++r) chunk->add_item_keys(item_keys[r]);
    }
    open = writer->Write(message);  // false: the server already answered (an error); Finish says which
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

// ---- Queries ----------------------------------------------------------------

StatusOr<std::vector<double>> Client::Similarity(const kls::v1::KernelRef& kernel,
                                                 const std::vector<std::pair<int, int>>& pairs) {
  kls::v1::SimilarityRequest request;
  *request.mutable_kernel() = kernel;
  for (const auto& [i, j] : pairs) {
    request.add_i(i);
    request.add_j(j);
  }
  auto response = Unary<kls::v1::SimilarityResponse>(options_, [&](grpc::ClientContext* c,
                                                                    kls::v1::SimilarityResponse* r) {
    return stubs_->queries->Similarity(c, request, r);
  });
  if (!response.ok()) return response.status();
  return std::vector<double>(response->values().begin(), response->values().end());
}

StatusOr<kls::v1::SimilarityResponse> Client::Similarity(const kls::v1::SimilarityRequest& request) {
  return Unary<kls::v1::SimilarityResponse>(options_, [&](grpc::ClientContext* c, kls::v1::SimilarityResponse* r) {
    return stubs_->queries->Similarity(c, request, r);
  });
}

StatusOr<kls::v1::TopKResponse> Client::TopK(const kls::v1::TopKRequest& request) {
  return Unary<kls::v1::TopKResponse>(options_, [&](grpc::ClientContext* c, kls::v1::TopKResponse* r) {
    return stubs_->queries->TopK(c, request, r);
  });
}

StatusOr<kls::v1::EmbedResponse> Client::Embed(const kls::v1::EmbedRequest& request) {
  return Unary<kls::v1::EmbedResponse>(options_, [&](grpc::ClientContext* c, kls::v1::EmbedResponse* r) {
    return stubs_->queries->Embed(c, request, r);
  });
}

StatusOr<kls::v1::ReRankResponse> Client::ReRank(const kls::v1::ReRankRequest& request) {
  return Unary<kls::v1::ReRankResponse>(options_, [&](grpc::ClientContext* c, kls::v1::ReRankResponse* r) {
    return stubs_->queries->ReRank(c, request, r);
  });
}

StatusOr<kls::v1::SimilarityResponse> Client::SocialStrength(const kls::v1::SocialStrengthRequest& request) {
  return Unary<kls::v1::SimilarityResponse>(options_, [&](grpc::ClientContext* c, kls::v1::SimilarityResponse* r) {
    return stubs_->queries->SocialStrength(c, request, r);
  });
}

StatusOr<kls::v1::TopKResponse> Client::Recommend(const kls::v1::RecommendRequest& request, bool groups) {
  return Unary<kls::v1::TopKResponse>(options_, [&](grpc::ClientContext* c, kls::v1::TopKResponse* r) {
    return groups ? stubs_->queries->RecommendGroups(c, request, r) : stubs_->queries->RecommendFriends(c, request, r);
  });
}

StatusOr<kls::v1::ClassifyResponse> Client::Classify(const kls::v1::ClassifyRequest& request) {
  return Unary<kls::v1::ClassifyResponse>(options_, [&](grpc::ClientContext* c, kls::v1::ClassifyResponse* r) {
    return stubs_->queries->Classify(c, request, r);
  });
}

StatusOr<kls::v1::ClassifyUsersResponse> Client::ClassifyUsers(const kls::v1::ClassifyUsersRequest& request) {
  return Unary<kls::v1::ClassifyUsersResponse>(options_,
                                               [&](grpc::ClientContext* c, kls::v1::ClassifyUsersResponse* r) {
                                                 return stubs_->queries->ClassifyUsers(c, request, r);
                                               });
}

}  // namespace kls
