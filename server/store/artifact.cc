#include "server/store/artifact.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

namespace kls::store {
namespace {

constexpr char kMagic[8] = {'K', 'L', 'S', 'A', 'R', 'T', '0', '1'};
constexpr uint64_t kHeaderBytes = 32;
constexpr uint64_t kEntryBytes = 88;
constexpr uint64_t kNameBytes = 48;
constexpr uint64_t kAlign = 64;

uint64_t AlignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// The CRC-32 `crc` of earlier bytes extended by data[0, n).
uLong Crc32Update(uLong crc, const uint8_t* data, uint64_t n) {
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    n -= chunk;
  }
  return crc;
}

uint32_t Crc32(const uint8_t* data, uint64_t n) {
  return static_cast<uint32_t>(Crc32Update(crc32(0L, Z_NULL, 0), data, n));
}

template <typename T>
void Put(uint8_t* buf, uint64_t at, T v) {
  std::memcpy(buf + at, &v, sizeof(T));
}
template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Status DiskFull(const std::string& dir, const std::string& what) {
  return ResourceExhaustedError("no space left: the file system holding \"" + dir + "\" is full (" + what +
                                "); nothing was written — free space there and retry");
}

Status FileError(const std::string& what, const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    return DiskFull(std::filesystem::path(path).parent_path().string(), what + " \"" + path + "\": " + std::strerror(err));
  }
  return InternalError(what + " \"" + path + "\": " + std::strerror(err));
}

namespace {

Status WriteAll(int fd, const uint8_t* data, uint64_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, std::min<uint64_t>(n, 1u << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return FileError("writing", path, errno);
    }
    data += w;
    n -= static_cast<uint64_t>(w);
  }
  return OkStatus();
}

uint64_t ElementBytes(DType t) { return t == DType::kFloat64 ? 8 : t == DType::kInt32 ? 4 : 1; }

// Checks the header, section table and CRC-32 of a complete artifact image
// and lists its sections (pointing into `p`). `what` names it in errors.
Status ParseImage(const uint8_t* p, uint64_t size, const std::string& what,
                  std::vector<MappedArtifact::Section>* sections) {
  if (size < kHeaderBytes) return DataLossError(what + " is truncated (" + std::to_string(size) + " bytes)");
  auto corrupt = [&](const std::string& why) { return DataLossError(what + " is corrupted: " + why); };
  if (std::memcmp(p, kMagic, 8) != 0) return corrupt("bad magic");
  const uint32_t count = Get<uint32_t>(p + 8);
  const uint64_t body = Get<uint64_t>(p + 16);
  if (body != size - kHeaderBytes) {
    return corrupt("body length " + std::to_string(body) + " but the file has " +
                   std::to_string(size - kHeaderBytes) + " bytes after the header");
  }
  if (kHeaderBytes + kEntryBytes * static_cast<uint64_t>(count) > size) return corrupt("section table overruns the file");
  if (Crc32(p + kHeaderBytes, body) != Get<uint32_t>(p + 24)) return corrupt("checksum mismatch");
  for (uint32_t k = 0; k < count; ++k) {
    const uint8_t* e = p + kHeaderBytes + kEntryBytes * k;
    MappedArtifact::Section s;
    s.name.assign(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kNameBytes));
    s.dtype = static_cast<DType>(Get<uint32_t>(e + 48));
    s.rows = Get<uint64_t>(e + 56);
    s.cols = Get<uint64_t>(e + 64);
    const uint64_t off = Get<uint64_t>(e + 72);
    s.bytes = Get<uint64_t>(e + 80);
    if (off > size || s.bytes > size - off) return corrupt("section \"" + s.name + "\" overruns the file");
    s.data = p + off;
    sections->push_back(std::move(s));
  }
  return OkStatus();
}

// Where each section's payload starts (64-byte aligned, after the header and
// table) and the file's total size; INVALID_ARGUMENT for a bad name or a size
// that does not match the shape.
struct Layout {
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
};

StatusOr<Layout> Plan(const std::vector<SectionView>& sections) {
  Layout layout;
  uint64_t offset = AlignUp(kHeaderBytes + kEntryBytes * sections.size());
  for (const SectionView& s : sections) {
    if (s.name.empty() || s.name.size() >= kNameBytes) {
      return InvalidArgumentError("artifact section name \"" + s.name + "\" must have 1 to 47 bytes");
    }
    if (s.dtype != DType::kBytes && s.bytes != s.rows * s.cols * ElementBytes(s.dtype)) {
      return InvalidArgumentError("artifact section \"" + s.name + "\": " + std::to_string(s.bytes) +
                                  " bytes do not match " + std::to_string(s.rows) + " x " +
                                  std::to_string(s.cols));
    }
    layout.offsets.push_back(offset);
    offset = AlignUp(offset + s.bytes);
  }
  layout.total = offset;
  return layout;
}

// The header (CRC field 0) and section table, padded to the first payload
// (to the end of the file when there is none).
std::string Head(const std::vector<SectionView>& sections, const Layout& layout) {
  std::string head(layout.offsets.empty() ? layout.total : layout.offsets[0], '\0');
  uint8_t* buf = reinterpret_cast<uint8_t*>(head.data());
  std::memcpy(buf, kMagic, 8);
  Put<uint32_t>(buf, 8, static_cast<uint32_t>(sections.size()));
  Put<uint64_t>(buf, 16, layout.total - kHeaderBytes);
  for (size_t k = 0; k < sections.size(); ++k) {
    const SectionView& s = sections[k];
    const uint64_t e = kHeaderBytes + kEntryBytes * k;
    std::memcpy(buf + e, s.name.data(), s.name.size());
    Put<uint32_t>(buf, e + 48, static_cast<uint32_t>(s.dtype));
    Put<uint64_t>(buf, e + 56, s.rows);
    Put<uint64_t>(buf, e + 64, s.cols);
    Put<uint64_t>(buf, e + 72, layout.offsets[k]);
    Put<uint64_t>(buf, e + 80, s.bytes);
  }
  return head;
}

// Writes a file of `size` bytes atomically: `write(fd, tmp)` fills the
// temporary file, then fsync, rename into place and fsync of the directory.
// RESOURCE_EXHAUSTED (DiskFull) before anything is written when the file
// system has no room for it plus kMetadataHeadroomBytes.
Status WriteFileAtomicallyWith(const std::string& path, uint64_t size,
                               const std::function<Status(int fd, const std::string& tmp)>& write) {
  const std::string dir_of = std::filesystem::path(path).parent_path().string();
  struct statvfs fs;
  if (::statvfs(dir_of.empty() ? "." : dir_of.c_str(), &fs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < size + kMetadataHeadroomBytes) {
      return DiskFull(dir_of, "writing \"" + path + "\": " + std::to_string(size) + " bytes would leave less than " +
                                  std::to_string(kMetadataHeadroomBytes >> 20) + " MiB free for the metadata (" +
                                  std::to_string(free_bytes) + " bytes free)");
    }
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileError("creating", tmp, errno);
  Status st = write(fd, tmp);
  if (st.ok() && ::fsync(fd) != 0) st = FileError("fsync", tmp, errno);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = InternalError("renaming \"" + tmp + "\" to \"" + path + "\": " + std::strerror(errno));
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  // Make the rename itself durable.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::string> EncodeArtifact(const std::vector<SectionView>& sections) {
  // Header + table + aligned payloads in one buffer; the CRC covers all but the header.
  KLS_ASSIGN_OR_RETURN(const Layout layout, Plan(sections));
  std::string out = Head(sections, layout);
  out.resize(layout.total, '\0');
  uint8_t* buf = reinterpret_cast<uint8_t*>(out.data());
  for (size_t k = 0; k < sections.size(); ++k) {
    if (sections[k].bytes) std::memcpy(buf + layout.offsets[k], sections[k].data, sections[k].bytes);
  }
  Put<uint32_t>(buf, 24, Crc32(buf + kHeaderBytes, layout.total - kHeaderBytes));
  return out;
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  return WriteFileAtomicallyWith(path, bytes.size(), [&](int fd, const std::string& tmp) {
    return WriteAll(fd, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), tmp);
  });
}

Status WriteArtifact(const std::string& path, const std::vector<SectionView>& sections) {
  // Streamed: the payloads go from the caller's memory to the file, the CRC
  // computed on the way and the header written last, so no image of the
  // artifact is held in memory (a million-row data set is not copied).
  KLS_ASSIGN_OR_RETURN(const Layout layout, Plan(sections));
  std::string head = Head(sections, layout);
  return WriteFileAtomicallyWith(path, layout.total, [&](int fd, const std::string& tmp) -> Status {
    uLong crc = crc32(0L, Z_NULL, 0);
    auto body = [&](const void* data, uint64_t n) {
      crc = Crc32Update(crc, static_cast<const uint8_t*>(data), n);
      return WriteAll(fd, static_cast<const uint8_t*>(data), n, tmp);
    };
    KLS_RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const uint8_t*>(head.data()), kHeaderBytes, tmp));
    KLS_RETURN_IF_ERROR(body(head.data() + kHeaderBytes, head.size() - kHeaderBytes));
    static constexpr uint8_t kZeros[kAlign] = {};
    uint64_t at = head.size();
    for (const SectionView& s : sections) {
      KLS_RETURN_IF_ERROR(body(s.data, s.bytes));
      at += s.bytes;
      KLS_RETURN_IF_ERROR(body(kZeros, AlignUp(at) - at));
      at = AlignUp(at);
    }
    Put<uint32_t>(reinterpret_cast<uint8_t*>(head.data()), 24, static_cast<uint32_t>(crc));
    if (::pwrite(fd, head.data(), kHeaderBytes, 0) != static_cast<ssize_t>(kHeaderBytes)) {
      return FileError("writing the header of", tmp, errno);
    }
    return OkStatus();
  });
}

StatusOr<std::shared_ptr<MappedArtifact>> MappedArtifact::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("artifact \"" + path + "\" does not exist");
    return InternalError("opening artifact \"" + path + "\": " + std::strerror(errno));
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    ::close(fd);
    return InternalError("stat artifact \"" + path + "\": " + std::strerror(errno));
  }
  const uint64_t size = static_cast<uint64_t>(sb.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    return DataLossError("artifact \"" + path + "\" is truncated (" + std::to_string(size) + " bytes)");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return InternalError("mmap artifact \"" + path + "\": " + std::strerror(errno));
  std::shared_ptr<MappedArtifact> a(new MappedArtifact());
  a->path_ = path;
  a->base_ = base;
  a->size_ = size;
  KLS_RETURN_IF_ERROR(ParseImage(static_cast<const uint8_t*>(base), size, "artifact \"" + path + "\"", &a->sections_));
  return a;
}

MappedArtifact::~MappedArtifact() {
  if (base_) ::munmap(base_, size_);
}

const MappedArtifact::Section* MappedArtifact::Find(const std::string& name) const {
  for (const Section& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

Status VerifyArtifact(const std::string& path) { return MappedArtifact::Open(path).status(); }

Status VerifyArtifactBytes(const std::string& bytes, const std::string& what) {
  std::vector<MappedArtifact::Section> sections;
  return ParseImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what, &sections);
}

}  // namespace kls::store
