#include "services/images/registry/challenge.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace berth::images {
namespace {

bool IsTchar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken68Char(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
         c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::vector<AuthChallenge>> Parse() {
    std::vector<AuthChallenge> challenges;
    SkipListSeparators();
    while (!AtEnd()) {
      AuthChallenge challenge;
      absl::string_view scheme = Token();
      if (scheme.empty()) return Error("expected an authentication scheme");
      challenge.scheme = absl::AsciiStrToLower(scheme);
      SkipSpace();
      if (!TryToken68(&challenge.token68)) {
        // Parameters, separated by commas, until one that is not a
        // parameter begins the next challenge.
        while (!AtEnd() && Peek() != ',') {
          std::string name, value;
          absl::Status status = Param(&name, &value);
          if (!status.ok()) return status;
          challenge.params.emplace(std::move(name), std::move(value));
          SkipSpace();
          if (!AtEnd() && Peek() != ',') {
            return Error("expected ',' after a parameter");
          }
          SkipListSeparators();
          if (!LooksLikeParam()) break;
        }
      }
      challenges.push_back(std::move(challenge));
      SkipListSeparators();
    }
    if (challenges.empty()) return Error("no challenge");
    return challenges;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t')) ++pos_;
  }
  void SkipListSeparators() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == ',')) {
      ++pos_;
    }
  }

  absl::string_view Token() {
    size_t start = pos_;
    while (!AtEnd() && IsTchar(Peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // token68 [OWS] then the end or a comma; leaves pos_ unchanged otherwise.
  bool TryToken68(std::string* out) {
    size_t start = pos_;
    size_t p = pos_;
    while (p < text_.size() && IsToken68Char(text_[p])) ++p;
    if (p == start) return false;
    while (p < text_.size() && text_[p] == '=') ++p;
    size_t end = p;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    if (p < text_.size() && text_[p] != ',') return false;
    // "abc=" followed by the end or a comma reads as a token68: a parameter
    // needs a value (RFC 9110's token has at least one character).
    *out = std::string(text_.substr(start, end - start));
    pos_ = p;
    return true;
  }

  // Whether the text at pos_ is `token BWS "="` (a parameter of the current
  // challenge rather than the next challenge's scheme).
  bool LooksLikeParam() const {
    size_t p = pos_;
    while (p < text_.size() && IsTchar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return p < text_.size() && text_[p] == '=';
  }

  absl::Status Param(std::string* name, std::string* value) {
    absl::string_view token = Token();
    if (token.empty()) return Error("expected a parameter name");
    *name = absl::AsciiStrToLower(token);
    SkipSpace();
    if (AtEnd() || Peek() != '=') {
      return Error(absl::StrCat("expected '=' after parameter ", *name));
    }
    ++pos_;
    SkipSpace();
    if (!AtEnd() && Peek() == '"') return QuotedString(*name, value);
    // Some servers send unquoted values that are not tokens (a URL): take
    // everything up to the next separator.
    size_t start = pos_;
    while (!AtEnd() && Peek() != ',' && Peek() != ' ' && Peek() != '\t' &&
           Peek() != '"') {
      ++pos_;
    }
    *value = std::string(text_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::Status QuotedString(absl::string_view name, std::string* value) {
    ++pos_;  // the opening quote
    value->clear();
    while (!AtEnd()) {
      char c = Peek();
      ++pos_;
      if (c == '"') return absl::OkStatus();
      if (c == '\\') {
        if (AtEnd()) break;
        c = Peek();
        ++pos_;
      }
      value->push_back(c);
    }
    return Error(absl::StrCat("unterminated quoted value of parameter ", name));
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid WWW-Authenticate header \"", text_, "\": ", what,
                     " at offset ", pos_));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string AuthChallenge::Param(absl::string_view name) const {
  auto it = params.find(absl::AsciiStrToLower(name));
  return it == params.end() ? std::string() : it->second;
}

absl::StatusOr<std::vector<AuthChallenge>> ParseWwwAuthenticate(
    absl::string_view header) {
  return Parser(header).Parse();
}

absl::StatusOr<std::vector<AuthChallenge>> ParseWwwAuthenticateHeaders(
    const std::vector<std::string>& headers) {
  std::vector<AuthChallenge> all;
  std::vector<std::string> errors;
  for (const std::string& header : headers) {
    absl::StatusOr<std::vector<AuthChallenge>> parsed =
        ParseWwwAuthenticate(header);
    if (!parsed.ok()) {
      errors.push_back(std::string(parsed.status().message()));
      continue;
    }
    for (AuthChallenge& challenge : *parsed) {
      all.push_back(std::move(challenge));
    }
  }
  if (all.empty()) {
    if (errors.empty()) {
      return absl::InvalidArgumentError("no WWW-Authenticate header");
    }
    return absl::InvalidArgumentError(absl::StrJoin(errors, "; "));
  }
  return all;
}

}  // namespace berth::images
