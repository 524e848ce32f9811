// Image references as docker and containerd parse them:
//   busybox                      -> docker.io/library/busybox:latest
//   registry:5000/team/app:1.2   -> registry:5000/team/app:1.2
//   ghcr.io/x/y@sha256:<64 hex>  -> by digest (a tag may be given too)
// Grammar: the distribution project's reference grammar (lowercase path
// components of [a-z0-9] separated by '.', '_', '__' or dashes; a domain is
// the first component when it has a '.' or ':' or is "localhost"; tags are
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}).

#ifndef SERVICES_IMAGES_OCI_REFERENCE_H_
#define SERVICES_IMAGES_OCI_REFERENCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::images {

struct Reference {
  // "docker.io", "registry:5000", "127.0.0.1:5000".
  std::string domain;
  // "library/busybox", "team/app".
  std::string repository;
  // "latest" when neither tag nor digest was given; may be empty when a
  // digest was.
  std::string tag;
  // "sha256:<hex>" or empty.
  std::string digest;

  // domain/repository
  std::string Name() const;
  // The full normalised form: domain/repository[:tag][@digest].
  std::string String() const;
  // What a registry's manifest endpoint takes: the digest if set, else tag.
  std::string Object() const;
};

// Parses and normalises `text`. INVALID_ARGUMENT names the text and what is
// wrong with it ("invalid reference \"Busybox\": repository name must be
// lowercase").
absl::StatusOr<Reference> ParseReference(absl::string_view text);

// The short form docker shows: "busybox:latest" for docker.io/library/...
std::string FamiliarString(const Reference& reference);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_OCI_REFERENCE_H_
