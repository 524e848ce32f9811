#include "services/images/unpack/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/remove_tree.h"
#include "services/common/test_util.h"

namespace berth::images {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

enum class Compression { kNone, kGzip, kZstd };

constexpr time_t kTime = 1600000000;

// Writes a tar (pax) archive into memory with libarchive, as registries
// serve layers: plain, gzip or zstd.
class TarBuilder {
 public:
  using Configure = std::function<void(struct archive_entry*)>;

  explicit TarBuilder(Compression compression = Compression::kNone) {
    archive_ = archive_write_new();
    archive_write_set_format_pax(archive_);
    if (compression == Compression::kGzip) {
      archive_write_add_filter_gzip(archive_);
    } else if (compression == Compression::kZstd) {
      archive_write_add_filter_zstd(archive_);
    }
    // The last block unpadded: a zstd frame followed by zeros is not a zstd
    // stream.
    archive_write_set_bytes_in_last_block(archive_, 1);
    EXPECT_EQ(archive_write_open(archive_, &out_, nullptr, &Write, nullptr),
              ARCHIVE_OK)
        << archive_error_string(archive_);
  }
  ~TarBuilder() {
    if (archive_ != nullptr) archive_write_free(archive_);
  }

  // An entry of `type` named `name` (as is: nothing is cleaned), root's,
  // with time kTime, then `configure`'s changes; `data` written after.
  TarBuilder& Add(const std::string& name, mode_t type, mode_t perm,
                  const std::string& data = "",
                  const Configure& configure = nullptr) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    archive_entry_set_filetype(entry, type);
    archive_entry_set_perm(entry, perm);
    archive_entry_set_size(entry, static_cast<la_int64_t>(data.size()));
    archive_entry_set_mtime(entry, kTime, 0);
    if (configure) configure(entry);
    EXPECT_EQ(archive_write_header(archive_, entry), ARCHIVE_OK)
        << name << ": " << archive_error_string(archive_);
    if (!data.empty()) {
      EXPECT_EQ(archive_write_data(archive_, data.data(), data.size()),
                static_cast<la_ssize_t>(data.size()));
    }
    archive_entry_free(entry);
    return *this;
  }
  TarBuilder& File(const std::string& name, const std::string& data,
                   mode_t perm = 0644, const Configure& configure = nullptr) {
    return Add(name, AE_IFREG, perm, data, configure);
  }
  TarBuilder& Dir(const std::string& name, mode_t perm = 0755,
                  const Configure& configure = nullptr) {
    return Add(name, AE_IFDIR, perm, "", configure);
  }
  TarBuilder& Symlink(const std::string& name, const std::string& target) {
    return Add(name, AE_IFLNK, 0777, "", [&](struct archive_entry* entry) {
      archive_entry_set_symlink(entry, target.c_str());
    });
  }
  TarBuilder& HardLink(const std::string& name, const std::string& target) {
    return Add(name, AE_IFREG, 0644, "", [&](struct archive_entry* entry) {
      archive_entry_set_hardlink(entry, target.c_str());
    });
  }

  // The whole archive.
  std::string Finish() {
    EXPECT_EQ(archive_write_close(archive_), ARCHIVE_OK)
        << archive_error_string(archive_);
    archive_write_free(archive_);
    archive_ = nullptr;
    return out_;
  }

 private:
  static la_ssize_t Write(struct archive*, void* out, const void* data,
                          size_t size) {
    static_cast<std::string*>(out)->append(static_cast<const char*>(data),
                                           size);
    return static_cast<la_ssize_t>(size);
  }

  struct archive* archive_;
  std::string out_;
};

struct stat Lstat(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path << ": " << strerror(errno);
  return st;
}

void WriteFile(const std::string& path, const std::string& content) {
  const base::UniqueFd fd(
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << path << ": " << strerror(errno);
  ASSERT_EQ(write(fd.get(), content.data(), content.size()),
            static_cast<ssize_t>(content.size()));
}

// The value of extended attribute `name` of `path` (not followed), or
// "<absent>".
std::string Xattr(const std::string& path, const char* name) {
  char value[256];
  const ssize_t n = lgetxattr(path.c_str(), name, value, sizeof(value));
  if (n < 0) return "<absent>";
  return std::string(value, n);
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return names;
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(listing);
  return names;
}

// A work directory per test: dest/ (the layer's) and, beside it, canary/
// with one file, which no archive may change.
class UnpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "unpacking keeps owners, device nodes and trusted.* "
                      "attributes: needs root";
    }
    std::string pattern =
        absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp",
                     "/unpack-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << strerror(errno);
    work_ = pattern;
    dest_ = work_ + "/dest";
    canary_ = work_ + "/canary";
    ASSERT_EQ(mkdir(dest_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(canary_.c_str(), 0755), 0);
    WriteFile(canary_ + "/file", "untouched");
    canary_dir_ = Lstat(canary_);
    canary_file_ = Lstat(canary_ + "/file");
  }
  void TearDown() override {
    if (!work_.empty()) {
      EXPECT_TRUE(RemoveTree(work_).ok());
    }
  }

  absl::StatusOr<UnpackResult> Unpack(const std::string& blob,
                                      const std::string& dest,
                                      const UnpackOptions& options = {}) {
    const std::string blob_path = work_ + "/blob";
    WriteFile(blob_path, blob);
    const base::UniqueFd fd(open(blob_path.c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(fd.valid());
    absl::StatusOr<UnpackResult> result = UnpackLayer(fd.get(), dest, options);
    unlink(blob_path.c_str());
    return result;
  }
  absl::StatusOr<UnpackResult> Unpack(const std::string& blob,
                                      const UnpackOptions& options = {}) {
    return Unpack(blob, dest_, options);
  }

  // Nothing beside dest/ changed: the work directory holds dest/ and
  // canary/ alone, canary/ its one file, unchanged, linked once.
  void ExpectNothingOutside() {
    EXPECT_THAT(Names(work_), UnorderedElementsAre("dest", "canary"));
    EXPECT_THAT(Names(canary_), UnorderedElementsAre("file"));
    EXPECT_EQ(ReadFileOrEmpty(canary_ + "/file"), "untouched");
    const struct stat dir = Lstat(canary_);
    EXPECT_EQ(dir.st_mtim.tv_sec, canary_dir_.st_mtim.tv_sec);
    EXPECT_EQ(dir.st_mtim.tv_nsec, canary_dir_.st_mtim.tv_nsec);
    const struct stat file = Lstat(canary_ + "/file");
    EXPECT_EQ(file.st_nlink, 1u);
    EXPECT_EQ(file.st_mode, canary_file_.st_mode);
    EXPECT_EQ(file.st_uid, canary_file_.st_uid);
  }

  // Unpacks `blob`, which must fail naming `entry`, and checks that nothing
  // outside dest/ was touched.
  void ExpectRefused(const std::string& blob, const std::string& entry,
                     absl::StatusCode code = absl::StatusCode::kInvalidArgument,
                     const UnpackOptions& options = {}) {
    const absl::StatusOr<UnpackResult> result = Unpack(blob, options);
    ASSERT_FALSE(result.ok());
    std::cout << "refused as expected: " << result.status() << "\n";
    EXPECT_EQ(result.status().code(), code) << result.status();
    EXPECT_THAT(result.status().message(),
                HasSubstr(absl::StrCat("layer entry \"", entry, "\": ")));
    ExpectNothingOutside();
  }

  std::string work_;
  std::string dest_;
  std::string canary_;
  struct stat canary_dir_;
  struct stat canary_file_;
};

std::string Sha256Of(const std::string& data) {
  return "sha256:" + Sha256Hex(data);
}

// A v2 file capability (CAP_NET_RAW permitted and effective), which chown
// clears: it survives only if set after the owner.
std::string NetRawCapability() {
  const uint32_t words[5] = {0x02000001u, 1u << 13, 0, 0, 0};
  return std::string(reinterpret_cast<const char*>(words), sizeof(words));
}

// The regular tree, the same entries for each compression.
std::string RegularTree(Compression compression) {
  const std::string capability = NetRawCapability();
  TarBuilder tar(compression);
  tar.Dir("./")
      .Dir("./dir", 0750,
           [](struct archive_entry* entry) {
             archive_entry_set_uid(entry, 1234);
             archive_entry_set_gid(entry, 5678);
             archive_entry_set_mtime(entry, kTime - 1000, 0);
           })
      .File("./dir/file", "hello\n", 0640,
            [](struct archive_entry* entry) {
              archive_entry_set_uid(entry, 1234);
              archive_entry_set_gid(entry, 5678);
              archive_entry_set_mtime(entry, kTime + 5, 123456789);
              archive_entry_xattr_add_entry(entry, "user.berth", "u", 1);
              archive_entry_xattr_add_entry(entry, "trusted.berth", "t", 1);
            })
      .File("setuid", "#!/bin/true\n", 04755,
            [&](struct archive_entry* entry) {
              archive_entry_set_uid(entry, 1000);
              archive_entry_set_gid(entry, 1000);
              archive_entry_xattr_add_entry(entry, "security.capability",
                                            capability.data(),
                                            capability.size());
            })
      .Dir("setgid", 02775)
      .Dir("sticky", 01777)
      .Dir("notoverlay", 0755,
           [](struct archive_entry* entry) {
             archive_entry_xattr_add_entry(entry, "trusted.overlay.opaque", "y",
                                           1);
           })
      .Symlink("dangling", "no/such/target")
      .Symlink("abs", "/etc/passwd")
      .Add("ownedlink", AE_IFLNK, 0777, "",
           [](struct archive_entry* entry) {
             archive_entry_set_symlink(entry, "dir/file");
             archive_entry_set_uid(entry, 42);
             archive_entry_set_gid(entry, 43);
             archive_entry_xattr_add_entry(entry, "trusted.berth", "l", 1);
           })
      .HardLink("hardlink", "./dir/file")
      .HardLink("linktolink", "abs")
      .Add("dev/null", AE_IFCHR, 0666, "",
           [](struct archive_entry* entry) {
             archive_entry_set_rdevmajor(entry, 1);
             archive_entry_set_rdevminor(entry, 3);
           })
      .Add("dev/loop0", AE_IFBLK, 0660, "",
           [](struct archive_entry* entry) {
             archive_entry_set_rdevmajor(entry, 7);
             archive_entry_set_rdevminor(entry, 0);
             archive_entry_set_gid(entry, 6);
           })
      // The kernel refuses user.* attributes on a FIFO: skipped, warned.
      .Add("fifo", AE_IFIFO, 0620, "",
           [](struct archive_entry* entry) {
             archive_entry_xattr_add_entry(entry, "user.berth", "f", 1);
           })
      .File("deep/er/file", "implicit parents")
      // Later entries replace earlier ones of the same name.
      .File("again", "first")
      .File("again", "second")
      .Dir("keptdir", 0700)
      .File("keptdir/inside", "kept")
      .Dir("keptdir", 0711)
      .Dir("gonedir")
      .File("gonedir/inside", "removed")
      .File("gonedir", "a file now")
      .File("wasfile", "file")
      .Symlink("wasfile", "dir")
      .File("large", std::string(3 << 20, 'x'));
  return tar.Finish();
}

class RegularTreeTest : public UnpackTest,
                        public ::testing::WithParamInterface<Compression> {};

TEST_P(RegularTreeTest, KeepsEverything) {
  const std::string blob = RegularTree(GetParam());
  absl::StatusOr<UnpackResult> result = Unpack(blob);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->diff_id, Sha256Of(RegularTree(Compression::kNone)));
  EXPECT_EQ(result->entries, 27);
  EXPECT_EQ(result->unpacked_size,
            6 + 12 + 16 + 5 + 6 + 4 + 7 + 10 + 4 + (3 << 20));
  const std::string d = dest_ + "/";

  struct stat st = Lstat(d + "dir/file");
  EXPECT_EQ(ReadFileOrEmpty(d + "dir/file"), "hello\n");
  EXPECT_EQ(st.st_mode, S_IFREG | 0640);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_EQ(st.st_mtim.tv_sec, kTime + 5);
  EXPECT_EQ(st.st_mtim.tv_nsec, 123456789);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_EQ(Lstat(d + "hardlink").st_ino, st.st_ino);
  EXPECT_EQ(Xattr(d + "dir/file", "user.berth"), "u");
  EXPECT_EQ(Xattr(d + "dir/file", "trusted.berth"), "t");

  // The directory's time is its entry's, though its file came after.
  st = Lstat(d + "dir");
  EXPECT_EQ(st.st_mode, S_IFDIR | 0750);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_mtim.tv_sec, kTime - 1000);

  st = Lstat(d + "setuid");
  EXPECT_EQ(st.st_mode, S_IFREG | 04755);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(Xattr(d + "setuid", "security.capability"), NetRawCapability());
  EXPECT_EQ(Lstat(d + "setgid").st_mode, S_IFDIR | 02775);
  EXPECT_EQ(Lstat(d + "sticky").st_mode, S_IFDIR | 01777);
  EXPECT_EQ(Xattr(d + "notoverlay", "trusted.overlay.opaque"), "<absent>");

  char target[64] = {};
  ASSERT_GT(readlink((d + "dangling").c_str(), target, sizeof(target) - 1), 0);
  EXPECT_STREQ(target, "no/such/target");
  EXPECT_TRUE(S_ISLNK(Lstat(d + "abs").st_mode));
  st = Lstat(d + "ownedlink");
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_uid, 42u);
  EXPECT_EQ(st.st_gid, 43u);
  EXPECT_EQ(st.st_mtim.tv_sec, kTime);
  EXPECT_EQ(Xattr(d + "ownedlink", "trusted.berth"), "l");
  // A hard link to a symbolic link is the link, not /etc/passwd.
  st = Lstat(d + "linktolink");
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_ino, Lstat(d + "abs").st_ino);

  st = Lstat(d + "dev/null");
  EXPECT_EQ(st.st_mode, S_IFCHR | 0666);
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  st = Lstat(d + "dev/loop0");
  EXPECT_EQ(st.st_mode, S_IFBLK | 0660);
  EXPECT_EQ(st.st_rdev, makedev(7, 0));
  EXPECT_EQ(st.st_gid, 6u);
  EXPECT_EQ(Lstat(d + "fifo").st_mode, S_IFIFO | 0620);
  EXPECT_EQ(Xattr(d + "fifo", "user.berth"), "<absent>");

  EXPECT_EQ(ReadFileOrEmpty(d + "deep/er/file"), "implicit parents");
  EXPECT_EQ(Lstat(d + "deep/er").st_mode, S_IFDIR | 0755);
  EXPECT_EQ(ReadFileOrEmpty(d + "again"), "second");
  EXPECT_EQ(ReadFileOrEmpty(d + "keptdir/inside"), "kept");
  EXPECT_EQ(Lstat(d + "keptdir").st_mode, S_IFDIR | 0711);
  EXPECT_EQ(ReadFileOrEmpty(d + "gonedir"), "a file now");
  EXPECT_TRUE(S_ISLNK(Lstat(d + "wasfile").st_mode));
  EXPECT_EQ(Lstat(d + "large").st_size, 3 << 20);
  // The root entry "./" leaves the directory's own mode alone.
  EXPECT_EQ(Lstat(dest_).st_mode, S_IFDIR | 0755);
  ExpectNothingOutside();
}

INSTANTIATE_TEST_SUITE_P(Compressions, RegularTreeTest,
                         ::testing::Values(Compression::kNone,
                                           Compression::kGzip,
                                           Compression::kZstd),
                         [](const auto& info) {
                           switch (info.param) {
                             case Compression::kNone:
                               return "Plain";
                             case Compression::kGzip:
                               return "Gzip";
                             case Compression::kZstd:
                               return "Zstd";
                           }
                           return "";
                         });

TEST_F(UnpackTest, ProgressReportsTheCompressedBytes) {
  const std::string blob =
      TarBuilder(Compression::kGzip).File("random", Sha256Hex("seed")).Finish();
  std::vector<int64_t> calls;
  UnpackOptions options;
  options.progress = [&](int64_t read) { calls.push_back(read); };
  ASSERT_TRUE(Unpack(blob, options).ok());
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), static_cast<int64_t>(blob.size()));
}

TEST_F(UnpackTest, SparseFiles) {
  constexpr size_t kSize = 1 << 20;
  const std::string head(4096, 'h');
  const std::string tail(4096, 't');
  const std::string content = head + std::string(kSize - 2 * 4096, '\0') + tail;
  // The writer is given the whole content and stores the two regions.
  const std::string blob =
      TarBuilder(Compression::kGzip)
          .Add("sparse", AE_IFREG, 0644, content,
               [&](struct archive_entry* entry) {
                 archive_entry_sparse_add_entry(entry, 0, 4096);
                 archive_entry_sparse_add_entry(entry, kSize - 4096, 4096);
               })
          .Finish();
  absl::StatusOr<UnpackResult> result = Unpack(blob);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->unpacked_size, 8192);
  EXPECT_TRUE(ReadFileOrEmpty(dest_ + "/sparse") == content)
      << "the sparse file's content differs";
  // The hole stays a hole.
  EXPECT_LT(Lstat(dest_ + "/sparse").st_blocks * 512, 64 * 1024);
}

TEST_F(UnpackTest, EmptyArchives) {
  const std::string empty_tar = TarBuilder().Finish();
  absl::StatusOr<UnpackResult> result = Unpack(empty_tar);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->entries, 0);
  EXPECT_EQ(result->diff_id, Sha256Of(empty_tar));
  // A blob of no bytes at all is an empty layer too (as Docker reads it).
  result = Unpack("");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->diff_id, Sha256Of(""));
  EXPECT_TRUE(Names(dest_).empty());
}

TEST_F(UnpackTest, RefusesANonEmptyDestination) {
  WriteFile(dest_ + "/left", "over");
  const absl::StatusOr<UnpackResult> result =
      Unpack(TarBuilder().File("f", "x").Finish());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr(dest_));
}

TEST_F(UnpackTest, ManyEntries) {
  TarBuilder tar(Compression::kGzip);
  for (int d = 0; d < 100; ++d) {
    tar.Dir(absl::StrCat("d", d));
    for (int f = 0; f < 200; ++f) {
      tar.File(absl::StrCat("d", d, "/f", f), absl::StrCat(d, ".", f));
    }
  }
  absl::StatusOr<UnpackResult> result = Unpack(tar.Finish());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->entries, 100 + 100 * 200);
  EXPECT_EQ(Names(dest_).size(), 100u);
  EXPECT_EQ(Names(dest_ + "/d99").size(), 200u);
  EXPECT_EQ(ReadFileOrEmpty(dest_ + "/d42/f199"), "42.199");
}

// Edits the ustar header at `offset` in `tar` with `edit`, then sets its
// checksum again (its bytes summed, the checksum field itself as spaces).
void EditHeader(std::string* tar, size_t offset,
                const std::function<void(char* header)>& edit) {
  ASSERT_LE(offset + 512, tar->size());
  char* header = tar->data() + offset;
  edit(header);
  memset(header + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += static_cast<unsigned char>(header[i]);
  char field[8];
  snprintf(field, sizeof(field), "%06o", sum);
  memcpy(header + 148, field, 7);  // six digits and a NUL; the space stays
}

// A ustar archive of one file `name` holding `data`, whatever bytes the
// name has (libarchive's writer would convert the name, or make it pax).
std::string UstarWithName(const std::string& name, const std::string& data) {
  std::string tar = TarBuilder().File("x", data).Finish();
  EXPECT_EQ(tar.find("PaxHeader"), std::string::npos);
  EXPECT_LT(name.size(), 100u);
  EditHeader(&tar, 0, [&](char* header) {
    memcpy(header, name.c_str(), name.size() + 1);
  });
  return tar;
}

TEST_F(UnpackTest, NonAsciiNamesAreKeptAsBytes) {
  // In a pax header (UTF-8), as Go's archive/tar writes them, and in a
  // ustar header (bytes, here not UTF-8 at all).
  const std::string utf8 = "h\xc3\xa9llo-\xe2\x9c\x93";
  const std::string latin1 = "h\xe9llo";
  std::string pax;
  {
    const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", nullptr);
    ASSERT_NE(locale, nullptr);
    const locale_t previous = uselocale(locale);
    pax = TarBuilder().File(utf8, "utf-8").Finish();
    uselocale(previous);
    freelocale(locale);
  }
  ASSERT_NE(pax.find("PaxHeader"), std::string::npos);
  // The first archive without its end (two zero blocks), then the second.
  absl::StatusOr<UnpackResult> result = Unpack(
      pax.substr(0, pax.size() - 1024) + UstarWithName(latin1, "latin-1"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->entries, 2);
  EXPECT_EQ(ReadFileOrEmpty(dest_ + "/" + utf8), "utf-8");
  EXPECT_EQ(ReadFileOrEmpty(dest_ + "/" + latin1), "latin-1");
}

// Whiteouts become overlayfs' own, and overlayfs honours them.
TEST_F(UnpackTest, WhiteoutsWorkInAnOverlay) {
  const std::string lower = work_ + "/lower";
  const std::string upper = work_ + "/upper";
  ASSERT_EQ(mkdir(lower.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(upper.c_str(), 0755), 0);
  absl::StatusOr<UnpackResult> result = Unpack(TarBuilder(Compression::kGzip)
                                                   .Dir("a")
                                                   .File("a/keep", "kept")
                                                   .File("a/gone", "gone")
                                                   .Dir("o")
                                                   .File("o/old", "hidden")
                                                   .File("top", "gone")
                                                   .Finish(),
                                               lower);
  ASSERT_TRUE(result.ok()) << result.status();
  result = Unpack(TarBuilder(Compression::kGzip)
                      .Dir("a")
                      .File("a/.wh.gone", "")
                      .Dir("o")
                      .File("o/.wh..wh..opq", "")
                      .File("o/new", "new")
                      .File(".wh.top", "")
                      .File(".wh..wh.plnk", "")
                      .Finish(),
                  upper);
  ASSERT_TRUE(result.ok()) << result.status();
  struct stat st = Lstat(upper + "/a/gone");
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(0, 0));
  EXPECT_TRUE(S_ISCHR(Lstat(upper + "/top").st_mode));
  EXPECT_FALSE(PathExists(upper + "/a/.wh.gone"));
  EXPECT_FALSE(PathExists(upper + "/o/.wh..wh..opq"));
  EXPECT_FALSE(PathExists(upper + "/.wh..wh.plnk"));
  EXPECT_EQ(Xattr(upper + "/o", "trusted.overlay.opaque"), "y");

  // A mount namespace of the test's own, so that nothing stays mounted.
  if (unshare(CLONE_NEWNS) != 0) {
    GTEST_SKIP() << "no mount namespace for the overlay: " << strerror(errno);
  }
  ASSERT_EQ(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0)
      << strerror(errno);
  const std::string merged = work_ + "/merged";
  ASSERT_EQ(mkdir(merged.c_str(), 0755), 0);
  const std::string options = absl::StrCat("lowerdir=", upper, ":", lower);
  ASSERT_EQ(
      mount("overlay", merged.c_str(), "overlay", MS_RDONLY, options.c_str()),
      0)
      << options << ": " << strerror(errno);
  EXPECT_EQ(ReadFileOrEmpty(merged + "/a/keep"), "kept");
  EXPECT_FALSE(PathExists(merged + "/a/gone"));
  EXPECT_FALSE(PathExists(merged + "/top"));
  EXPECT_FALSE(PathExists(merged + "/o/old"));
  EXPECT_EQ(ReadFileOrEmpty(merged + "/o/new"), "new");
  EXPECT_EQ(umount2(merged.c_str(), MNT_DETACH), 0) << strerror(errno);
}

// The malicious archives: each fails naming its entry, and nothing outside
// the layer's directory changes.

TEST_F(UnpackTest, RefusesAnAbsoluteName) {
  const std::string name = canary_ + "/pwned";
  ExpectRefused(TarBuilder().File("ok", "x").File(name, "pwned").Finish(),
                name);
}

TEST_F(UnpackTest, RefusesDotDot) {
  ExpectRefused(TarBuilder().File("../canary/pwned", "pwned").Finish(),
                "../canary/pwned");
  ExpectRefused(
      TarBuilder().Dir("a").File("a/../../canary/pwned", "pwned").Finish(),
      "a/../../canary/pwned");
}

TEST_F(UnpackTest, RefusesAWhiteoutOfDotDot) {
  ExpectRefused(TarBuilder().Dir("a").File("a/.wh...", "").Finish(),
                "a/.wh...");
  EXPECT_TRUE(PathExists(dest_ + "/a"));
}

TEST_F(UnpackTest, RefusesASymlinkAsAParent) {
  ExpectRefused(TarBuilder()
                    .Symlink("a", "/")
                    .File("a" + canary_ + "/pwned", "pwned")
                    .Finish(),
                "a" + canary_ + "/pwned");
  EXPECT_TRUE(RemoveTree(dest_).ok() && mkdir(dest_.c_str(), 0755) == 0);
  ExpectRefused(
      TarBuilder().Symlink("a", "..").File("a/canary/pwned", "pwned").Finish(),
      "a/canary/pwned");
  EXPECT_TRUE(RemoveTree(dest_).ok() && mkdir(dest_.c_str(), 0755) == 0);
  // A directory replaced by a link, then an entry through it.
  ExpectRefused(TarBuilder()
                    .Dir("d")
                    .Symlink("d", "../canary")
                    .Dir("d/sub")
                    .File("d/sub/pwned", "pwned")
                    .Finish(),
                "d/sub/");
}

TEST_F(UnpackTest, RefusesASymlinkToAnOutsideDirectory) {
  ExpectRefused(
      TarBuilder().Symlink("b", canary_).File("b/pwned", "pwned").Finish(),
      "b/pwned");
  EXPECT_TRUE(RemoveTree(dest_).ok() && mkdir(dest_.c_str(), 0755) == 0);
  // A file written through a link to an outside file is refused as well.
  ExpectRefused(
      TarBuilder().Symlink("c", canary_).File("c/file", "overwritten").Finish(),
      "c/file");
}

TEST_F(UnpackTest, RefusesHardLinksOutside) {
  const struct stat passwd = Lstat("/etc/passwd");
  ExpectRefused(TarBuilder().HardLink("h", "/etc/passwd").Finish(), "h");
  EXPECT_EQ(Lstat("/etc/passwd").st_nlink, passwd.st_nlink);
  EXPECT_TRUE(RemoveTree(dest_).ok() && mkdir(dest_.c_str(), 0755) == 0);
  ExpectRefused(TarBuilder().HardLink("h", canary_ + "/file").Finish(), "h");
  EXPECT_TRUE(RemoveTree(dest_).ok() && mkdir(dest_.c_str(), 0755) == 0);
  ExpectRefused(TarBuilder().HardLink("h", "../canary/file").Finish(), "h");
  EXPECT_TRUE(RemoveTree(dest_).ok() && mkdir(dest_.c_str(), 0755) == 0);
  // Not in the layer (a lower layer's file, say).
  ExpectRefused(TarBuilder().HardLink("h", "file").Finish(), "h");
}

TEST_F(UnpackTest, RefusesAHardLinkThroughASymlink) {
  ExpectRefused(
      TarBuilder().Symlink("s", canary_).HardLink("h", "s/file").Finish(), "h");
  EXPECT_TRUE(RemoveTree(dest_).ok() && mkdir(dest_.c_str(), 0755) == 0);
  ExpectRefused(
      TarBuilder().Symlink("s", "..").HardLink("h", "s/canary/file").Finish(),
      "h");
}

TEST_F(UnpackTest, RefusesATruncatedGzipStream) {
  // Random-looking content, so that the compressed stream is long.
  std::string content;
  for (int i = 0; content.size() < (1 << 20); ++i) {
    content += Sha256Hex(absl::StrCat(i));
  }
  const std::string blob = TarBuilder(Compression::kGzip)
                               .File("first", "x")
                               .File("big", content)
                               .Finish();
  const absl::StatusOr<UnpackResult> result =
      Unpack(blob.substr(0, blob.size() / 2));
  ASSERT_FALSE(result.ok());
  std::cout << "refused as expected: " << result.status() << "\n";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(), HasSubstr("layer entry \"big\": "));
  EXPECT_THAT(result.status().message(), HasSubstr("truncated"));
  ExpectNothingOutside();
}

// An archive whose last entry, "huge", claims `size` bytes and carries
// 1000: the stream ends there.
std::string ClaimingMoreThanItCarries(int64_t size) {
  std::string tar = TarBuilder()
                        .File("small", "x")
                        .File("huge", std::string(1000, 'h'))
                        .Finish();
  const size_t header = 1024;  // after small's header and data block
  EXPECT_EQ(tar.compare(header, 5, std::string("huge\0", 5)), 0);
  EditHeader(&tar, header, [&](char* h) {
    // The size field in base 256 (as GNU tar writes large sizes).
    h[124] = static_cast<char>(0x80);
    for (int i = 0; i < 11; ++i) {
      h[135 - i] = static_cast<char>((size >> (8 * i)) & 0xff);
    }
  });
  return tar.substr(0, header + 512 + 1000);
}

TEST_F(UnpackTest, RefusesAnEntryClaimingMoreThanItsData) {
  ExpectRefused(ClaimingMoreThanItCarries(int64_t{1} << 30), "huge",
                absl::StatusCode::kDataLoss);
}

TEST_F(UnpackTest, RefusesAnEntryClaimingMoreThanTheLimit) {
  // 1 TiB: over the default limit (64 GiB), refused before any byte.
  ExpectRefused(ClaimingMoreThanItCarries(int64_t{1} << 40), "huge",
                absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(PathExists(dest_ + "/huge"));
}

TEST_F(UnpackTest, RefusesAnEntryOverTheSizeLimit) {
  UnpackOptions options;
  options.max_entry_size = 1000;
  ExpectRefused(TarBuilder(Compression::kGzip)
                    .File("fits", std::string(1000, 'a'))
                    .File("toobig", std::string(1001, 'b'))
                    .Finish(),
                "toobig", absl::StatusCode::kOutOfRange, options);
  EXPECT_FALSE(PathExists(dest_ + "/toobig"));
}

TEST_F(UnpackTest, RefusesALayerOverTheTotalLimit) {
  UnpackOptions options;
  options.max_total_size = 1500;
  ExpectRefused(TarBuilder()
                    .File("one", std::string(1000, 'a'))
                    .File("two", std::string(1000, 'b'))
                    .Finish(),
                "two", absl::StatusCode::kOutOfRange, options);
}

TEST_F(UnpackTest, RefusesWhatIsNotATar) {
  const absl::StatusOr<UnpackResult> result = Unpack(std::string(4096, '\x7f'));
  ASSERT_FALSE(result.ok());
  std::cout << "refused as expected: " << result.status() << "\n";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(), HasSubstr("layer stream"));
}

}  // namespace
}  // namespace berth::images
