#include "plugins/sdk/handshake.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth::plugin {

std::string FormatHandshake(const Handshake& handshake) {
  return absl::StrCat(handshake.core_version, "|", handshake.app_version, "|",
                      handshake.network, "|", handshake.address, "|",
                      handshake.protocol);
}

absl::StatusOr<Handshake> ParseHandshake(absl::string_view line) {
  absl::ConsumeSuffix(&line, "\n");
  absl::ConsumeSuffix(&line, "\r");
  const std::vector<absl::string_view> parts = absl::StrSplit(line, '|');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad plugin handshake line \"", line, "\": ", why,
        " (want CORE-VERSION|APP-VERSION|unix|SOCKET-PATH|grpc)"));
  };
  // go-plugin may append a sixth part (a TLS certificate, empty without
  // TLS) and a seventh (multiplexing); berth accepts them empty.
  if (parts.size() < 5) return bad("fewer than 5 parts");
  for (size_t i = 5; i < parts.size(); ++i) {
    if (!parts[i].empty() && parts[i] != "false") {
      return bad(absl::StrCat("part ", i + 1, " (\"", parts[i],
                              "\") asks for TLS or multiplexing, which berth "
                              "does not speak"));
    }
  }
  Handshake handshake;
  if (!absl::SimpleAtoi(parts[0], &handshake.core_version)) {
    return bad("core version is not a number");
  }
  if (!absl::SimpleAtoi(parts[1], &handshake.app_version)) {
    return bad("app version is not a number");
  }
  handshake.network = std::string(parts[2]);
  if (handshake.network != "unix") {
    return bad(absl::StrCat("network \"", parts[2], "\" is not unix"));
  }
  handshake.address = std::string(parts[3]);
  if (handshake.address.empty() || handshake.address[0] != '/') {
    return bad("socket path is not absolute");
  }
  handshake.protocol = std::string(parts[4]);
  if (handshake.protocol != "grpc") {
    return bad(absl::StrCat("protocol \"", parts[4], "\" is not grpc"));
  }
  return handshake;
}

std::string NotLaunchedByHostMessage(absl::string_view binary) {
  return absl::StrCat(
      binary,
      " is a berth plugin: berth-node starts it and talks to it over a Unix "
      "socket. Running it by hand does nothing. To test a driver, run "
      "berth-driver-conformance --plugin=",
      binary, "\n");
}

}  // namespace berth::plugin
