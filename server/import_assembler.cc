#include "server/import_assembler.h"

#include <cmath>
#include <string>
#include <utility>

#include "core/common/names.h"
#include "server/upload_assembler.h"

namespace kls::server {

Status ImportAssembler::Add(const kls::v1::ImportKernelChunk& chunk) {
  if (!error_.ok()) return error_;
  error_ = Next(chunk, messages_++);
  return error_;
}

Status ImportAssembler::Next(const kls::v1::ImportKernelChunk& chunk, int64_t message) {
  if (message == 0) {
    return chunk.has_header() ? Header(chunk.header())
                              : InvalidArgumentError("message 0 of the import stream must be the header");
  }
  if (chunk.has_header()) {
    return InvalidArgumentError("message " + std::to_string(message) + " repeats the header (send it once, first)");
  }
  if (chunk.has_rows()) return Rows(chunk.rows());
  return InvalidArgumentError("message " + std::to_string(message) + " of the import stream is empty");
}

Status ImportAssembler::Header(const kls::v1::ImportKernelHeader& h) {
  if (h.name().empty()) return InvalidArgumentError("header.name must not be empty");
  if (static_cast<int64_t>(h.name().size()) > limits_.max_name_bytes) {
    return InvalidArgumentError("header.name is " + std::to_string(h.name().size()) + " bytes; at most " +
                                std::to_string(limits_.max_name_bytes) + " are allowed");
  }
  KLS_RETURN_IF_ERROR(ValidateName("header.name", h.name()));
  KLS_RETURN_IF_ERROR(
      CheckDeclaredShape(h.num_points(), h.dim(), limits_.max_points, limits_.max_dim, limits_.max_values));
  header_ = h;
  have_header_ = true;
  return OkStatus();
}

Status ImportAssembler::Rows(const kls::v1::ImportKernelRows& c) {
  const int64_t dim = header_.dim();
  if (c.first_row() != rows_) {
    return InvalidArgumentError("rows.first_row = " + std::to_string(c.first_row()) + " but " +
                                std::to_string(rows_) + " rows were received so far (rows must arrive in order)");
  }
  if (c.values_size() % dim != 0) {
    return InvalidArgumentError("rows chunk at first_row " + std::to_string(c.first_row()) + " has " +
                                std::to_string(c.values_size()) + " values, not a multiple of header.dim = " +
                                std::to_string(dim));
  }
  const int64_t rows = c.values_size() / dim;
  if (rows_ + rows > header_.num_points()) {
    return InvalidArgumentError("rows chunk at first_row " + std::to_string(c.first_row()) + " carries " +
                                std::to_string(rows) + " rows, beyond header.num_points = " +
                                std::to_string(header_.num_points()));
  }
  if (header_.has_item_keys() ? c.item_keys_size() != rows : c.item_keys_size() != 0) {
    return InvalidArgumentError(
        "rows chunk at first_row " + std::to_string(c.first_row()) + " has " + std::to_string(c.item_keys_size()) +
        " item_keys for " + std::to_string(rows) + " rows" +
        (header_.has_item_keys() ? " (one per row is required)" : " but header.has_item_keys is false"));
  }
  if (rows == 0) return OkStatus();
  if (embedding_.size() == 0) {
    // Allocated on the first rows, after the header passed the limits.
    KLS_RETURN_IF_ERROR(GuardExceptions("import", [&]() -> Status {
      embedding_.resize(header_.num_points(), dim);
      return OkStatus();
    }));
  }
  const double* in = c.values().data();
  double* out = embedding_.data() + rows_ * dim;
  for (int64_t t = 0; t < rows * dim; ++t) {
    if (!std::isfinite(in[t])) {
      return InvalidArgumentError("rows[" + std::to_string(rows_ + t / dim) + "][" + std::to_string(t % dim) +
                                  "] = " + FormatNumber(in[t]) + " is not finite");
    }
    out[t] = in[t];
  }
  for (int64_t r = 0; r < c.item_keys_size(); ++r) {
    const std::string& key = c.item_keys(static_cast<int>(r));
    const std::string where = "item_keys[" + std::to_string(rows_ + r) + "]";
    if (key.empty()) return InvalidArgumentError(where + " is empty");
    if (!seen_keys_.insert(key).second) {
      return InvalidArgumentError(where + " = '" + key + "' repeats an earlier key (keys must be unique)");
    }
    keys_.push_back(key);
  }
  rows_ += rows;
  return OkStatus();
}

Status ImportAssembler::Finish() const {
  if (!error_.ok()) return error_;
  if (!have_header_) return InvalidArgumentError("the import stream is empty; the first message must be the header");
  if (rows_ != header_.num_points()) {
    return InvalidArgumentError("the import stream ended after " + std::to_string(rows_) + " of header.num_points = " +
                                std::to_string(header_.num_points()) + " rows");
  }
  return OkStatus();
}

}  // namespace kls::server
