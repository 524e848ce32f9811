#include "services/images/oci/reference.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "services/images/oci/digest.h"

namespace berth::images {
namespace {

constexpr absl::string_view kDockerDomain = "docker.io";
constexpr absl::string_view kLegacyDockerDomain = "index.docker.io";
constexpr absl::string_view kOfficialRepositoryPrefix = "library/";
constexpr absl::string_view kDefaultTag = "latest";
// The distribution project's limits.
constexpr size_t kMaxNameLength = 255;
constexpr size_t kMaxTagLength = 128;
// Longer texts are quoted shortened in errors.
constexpr size_t kQuoteLimit = 300;

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  std::string quoted =
      text.size() > kQuoteLimit
          ? absl::StrCat(absl::CHexEscape(text.substr(0, kQuoteLimit)), "...")
          : absl::CHexEscape(text);
  return absl::InvalidArgumentError(
      absl::StrCat("invalid reference \"", quoted, "\": ", why));
}

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool IsWordChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// path-component := [a-z0-9]+ (separator [a-z0-9]+)*
// separator      := [_.] | "__" | [-]+
bool IsPathComponent(absl::string_view component) {
  if (component.empty() || !IsLowerAlnum(component.front()) ||
      !IsLowerAlnum(component.back())) {
    return false;
  }
  size_t i = 0;
  while (i < component.size()) {
    if (IsLowerAlnum(component[i])) {
      ++i;
      continue;
    }
    // A separator, then an alphanumeric (the last character is one).
    const size_t start = i;
    if (component[i] == '-') {
      while (i < component.size() && component[i] == '-') ++i;
    } else if (component.substr(i, 2) == "__") {
      i += 2;
    } else if (component[i] == '_' || component[i] == '.') {
      ++i;
    } else {
      return false;
    }
    if (i == start || i >= component.size() || !IsLowerAlnum(component[i])) {
      return false;
    }
  }
  return true;
}

// domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
bool IsDomainComponent(absl::string_view component) {
  if (component.empty() || !absl::ascii_isalnum(component.front()) ||
      !absl::ascii_isalnum(component.back())) {
    return false;
  }
  for (char c : component) {
    if (!absl::ascii_isalnum(c) && c != '-') return false;
  }
  return true;
}

// domain := host [":" port]; host := domain-name | "[" IPv6 "]".
absl::Status ValidateDomain(absl::string_view text, absl::string_view domain) {
  absl::string_view host = domain;
  absl::string_view port;
  if (absl::StartsWith(domain, "[")) {
    const size_t close = domain.find(']');
    if (close == absl::string_view::npos) {
      return Invalid(text, "unterminated IPv6 address in the domain");
    }
    host = domain.substr(0, close + 1);
    absl::string_view rest = domain.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return Invalid(text, "invalid domain");
      }
      port = rest.substr(1);
      if (port.empty()) return Invalid(text, "empty port in the domain");
    }
    const absl::string_view address = host.substr(1, host.size() - 2);
    if (address.empty() ||
        address.find_first_not_of("0123456789abcdefABCDEF:.") !=
            absl::string_view::npos) {
      return Invalid(text, "invalid IPv6 address in the domain");
    }
  } else {
    const size_t colon = domain.find(':');
    if (colon != absl::string_view::npos) {
      host = domain.substr(0, colon);
      port = domain.substr(colon + 1);
      if (port.empty()) return Invalid(text, "empty port in the domain");
    }
    for (absl::string_view component : absl::StrSplit(host, '.')) {
      if (!IsDomainComponent(component)) {
        return Invalid(text, absl::StrCat("invalid domain \"", domain, "\""));
      }
    }
  }
  if (!port.empty() &&
      port.find_first_not_of("0123456789") != absl::string_view::npos) {
    return Invalid(text,
                   absl::StrCat("invalid port in the domain \"", domain, "\""));
  }
  return absl::OkStatus();
}

bool IsTag(absl::string_view tag) {
  if (tag.empty() || tag.size() > kMaxTagLength || !IsWordChar(tag.front())) {
    return false;
  }
  for (char c : tag) {
    if (!IsWordChar(c) && c != '.' && c != '-') return false;
  }
  return true;
}

bool IsHex64(absl::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string Reference::Name() const {
  return absl::StrCat(domain, "/", repository);
}

std::string Reference::String() const {
  std::string out = Name();
  if (!tag.empty()) absl::StrAppend(&out, ":", tag);
  if (!digest.empty()) absl::StrAppend(&out, "@", digest);
  return out;
}

std::string Reference::Object() const { return digest.empty() ? tag : digest; }

absl::StatusOr<Reference> ParseReference(absl::string_view text) {
  if (text.empty()) return Invalid(text, "empty");
  Reference reference;

  absl::string_view name = text;
  const size_t at = text.find('@');
  if (at != absl::string_view::npos) {
    name = text.substr(0, at);
    const absl::string_view digest = text.substr(at + 1);
    absl::Status valid = ValidateDigest(digest);
    if (!valid.ok()) return Invalid(text, valid.message());
    reference.digest = std::string(digest);
  }

  // A tag follows the last ':' that comes after the last '/' (a ':' before
  // it belongs to the domain's port).
  const size_t colon = name.rfind(':');
  const size_t slash = name.rfind('/');
  if (colon != absl::string_view::npos &&
      (slash == absl::string_view::npos || colon > slash)) {
    const absl::string_view tag = name.substr(colon + 1);
    if (!IsTag(tag)) {
      return Invalid(
          text, absl::StrCat("invalid tag \"",
                             absl::CHexEscape(tag.substr(0, kMaxTagLength + 1)),
                             "\" (want [A-Za-z0-9_][A-Za-z0-9_.-]{0,127})"));
    }
    reference.tag = std::string(tag);
    name = name.substr(0, colon);
  }
  if (name.empty()) return Invalid(text, "empty repository name");

  // Docker's rule: the first component is a domain when it has a '.' or ':'
  // or is "localhost" (and is not uppercase: "Foo/bar" is a repository).
  absl::string_view remainder = name;
  std::string domain(kDockerDomain);
  const size_t first_slash = name.find('/');
  if (first_slash != absl::string_view::npos) {
    const absl::string_view first = name.substr(0, first_slash);
    if ((first.find_first_of(".:") != absl::string_view::npos ||
         first == "localhost") &&
        absl::AsciiStrToLower(first) == first) {
      domain = std::string(first);
      remainder = name.substr(first_slash + 1);
    }
    // An uppercase domain is taken as a repository, as docker does, and then
    // fails the lowercase rule below.
  }
  if (domain == kLegacyDockerDomain) domain = std::string(kDockerDomain);
  if (domain != kDockerDomain) {
    absl::Status valid = ValidateDomain(text, domain);
    if (!valid.ok()) return valid;
  }

  if (remainder.empty()) return Invalid(text, "empty repository name");
  if (absl::AsciiStrToLower(remainder) != remainder) {
    return Invalid(text, "repository name must be lowercase");
  }
  if (IsHex64(remainder) && domain == kDockerDomain) {
    return Invalid(text,
                   "a repository name may not be 64 hexadecimal characters "
                   "(an image id is not a reference)");
  }
  for (absl::string_view component : absl::StrSplit(remainder, '/')) {
    if (component.empty()) {
      return Invalid(text, "empty path component in the repository name");
    }
    if (!IsPathComponent(component)) {
      return Invalid(
          text, absl::StrCat("invalid path component \"",
                             absl::CHexEscape(component.substr(0, kQuoteLimit)),
                             "\" (want [a-z0-9] separated by '.', '_', '__' "
                             "or dashes)"));
    }
  }
  reference.domain = std::move(domain);
  if (reference.domain == kDockerDomain &&
      remainder.find('/') == absl::string_view::npos) {
    reference.repository = absl::StrCat(kOfficialRepositoryPrefix, remainder);
  } else {
    reference.repository = std::string(remainder);
  }
  if (reference.Name().size() > kMaxNameLength) {
    return Invalid(text, absl::StrCat("the name is longer than ",
                                      kMaxNameLength, " characters"));
  }
  if (reference.tag.empty() && reference.digest.empty()) {
    reference.tag = std::string(kDefaultTag);
  }
  return reference;
}

std::string FamiliarString(const Reference& reference) {
  std::string name = reference.repository;
  if (reference.domain != kDockerDomain) {
    name = reference.Name();
  } else if (absl::StartsWith(name, kOfficialRepositoryPrefix) &&
             name.find('/', kOfficialRepositoryPrefix.size()) ==
                 std::string::npos) {
    name = name.substr(kOfficialRepositoryPrefix.size());
  }
  if (!reference.tag.empty()) absl::StrAppend(&name, ":", reference.tag);
  if (!reference.digest.empty()) absl::StrAppend(&name, "@", reference.digest);
  return name;
}

}  // namespace berth::images
