// ByteWriter / ByteReader: a small, versioned, little-endian binary encoding
// for model attachments (a classifier, a social graph) that the store keeps
// next to a kernel's embedding. Core types serialize themselves with these so
// that the store stays ignorant of their layout.
//
// Reading is bounds-checked: every Get* fails with DATA_LOSS naming `what`
// instead of reading past the end, so a damaged attachment is reported, never
// trusted (the store's CRC-32 catches corruption first; this guards against
// format bugs and foreign files).
//
// Thread safety: none (one writer / reader per thread).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/common/status.h"

namespace kls {

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_arithmetic_v<T>, "Put takes numbers");
    const char* p = reinterpret_cast<const char*>(&v);
    out_.append(p, sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_.append(s);
  }
  void PutInts(const std::vector<int>& v) {
    Put<uint64_t>(v.size());
    for (int x : v) Put<int32_t>(x);
  }
  void PutMatrix(const Eigen::MatrixXd& m) {
    Put<uint64_t>(m.rows());
    Put<uint64_t>(m.cols());
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < m.rows(); ++i) Put<double>(m(i, j));
  }
  void PutVector(const Eigen::VectorXd& v) { PutMatrix(v); }
  /// A format tag and version, read back by ByteReader::ReadHeader.
  void PutHeader(uint32_t magic, uint32_t version) {
    Put<uint32_t>(magic);
    Put<uint32_t>(version);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  /// `what` names the encoded object in error messages ("classifier").
  ByteReader(const std::string& bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  template <typename T>
  Status Get(T* v) {
    static_assert(std::is_arithmetic_v<T>, "Get takes numbers");
    KLS_RETURN_IF_ERROR(Need(sizeof(T)));
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return OkStatus();
  }
  Status GetString(std::string* s) {
    uint64_t n = 0;
    KLS_RETURN_IF_ERROR(Get(&n));
    KLS_RETURN_IF_ERROR(Need(n));
    s->assign(bytes_.data() + pos_, n);
    pos_ += n;
    return OkStatus();
  }
  Status GetInts(std::vector<int>* v) {
    uint64_t n = 0;
    KLS_RETURN_IF_ERROR(Get(&n));
    if (n > Remaining() / 4) return Truncated();
    v->resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      int32_t x = 0;
      KLS_RETURN_IF_ERROR(Get(&x));
      (*v)[i] = x;
    }
    return OkStatus();
  }
  Status GetMatrix(Eigen::MatrixXd* m) {
    uint64_t rows = 0, cols = 0;
    KLS_RETURN_IF_ERROR(Get(&rows));
    KLS_RETURN_IF_ERROR(Get(&cols));
    // Each side fits an int (the shapes are used as ints downstream), and an
    // empty matrix is not walked column by column: a 0 × 2^60 shape from
    // damaged bytes must cost nothing (fuzz_attachments found it spinning).
    constexpr uint64_t kMaxSide = 2147483647;
    if (rows > kMaxSide || cols > kMaxSide) {
      return DataLossError(what_ + ": a " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix");
    }
    if (cols != 0 && rows > Remaining() / 8 / cols) return Truncated();
    m->resize(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
    if (m->size() == 0) return OkStatus();
    for (Eigen::Index j = 0; j < m->cols(); ++j)
      for (Eigen::Index i = 0; i < m->rows(); ++i) KLS_RETURN_IF_ERROR(Get(&(*m)(i, j)));
    return OkStatus();
  }
  Status GetVector(Eigen::VectorXd* v) {
    Eigen::MatrixXd m;
    KLS_RETURN_IF_ERROR(GetMatrix(&m));
    if (m.cols() != 1 && m.size() != 0) return DataLossError(what_ + ": expected a vector, found a matrix");
    *v = m.size() == 0 ? Eigen::VectorXd() : Eigen::VectorXd(m.col(0));
    return OkStatus();
  }
  /// DATA_LOSS unless the next bytes are PutHeader(magic, version).
  Status ReadHeader(uint32_t magic, uint32_t version) {
    uint32_t m = 0, v = 0;
    KLS_RETURN_IF_ERROR(Get(&m));
    KLS_RETURN_IF_ERROR(Get(&v));
    if (m != magic) return DataLossError(what_ + ": bad magic number");
    if (v != version) {
      return DataLossError(what_ + ": format version " + std::to_string(v) + " is not supported (expected " +
                           std::to_string(version) + ")");
    }
    return OkStatus();
  }
  /// DATA_LOSS unless every byte was consumed.
  Status ExpectEnd() const {
    if (pos_ != bytes_.size()) {
      return DataLossError(what_ + ": " + std::to_string(bytes_.size() - pos_) + " unexpected trailing bytes");
    }
    return OkStatus();
  }
  const std::string& what() const { return what_; }

 private:
  uint64_t Remaining() const { return bytes_.size() - pos_; }
  Status Need(uint64_t n) const { return n > Remaining() ? Truncated() : OkStatus(); }
  Status Truncated() const { return DataLossError(what_ + ": truncated at byte " + std::to_string(pos_)); }

  const std::string& bytes_;
  std::string what_;
  uint64_t pos_ = 0;
};

}  // namespace kls
