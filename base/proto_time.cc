#include "base/proto_time.h"

#include <cstdint>

#include "absl/time/time.h"

namespace berth::base {

google::protobuf::Timestamp ToProtoTimestamp(absl::Time time) {
  google::protobuf::Timestamp timestamp;
  const int64_t seconds = absl::ToUnixSeconds(time);
  timestamp.set_seconds(seconds);
  timestamp.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
  return timestamp;
}

absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

google::protobuf::Duration ToProtoDuration(absl::Duration duration) {
  google::protobuf::Duration proto;
  const int64_t seconds =
      absl::IDivDuration(duration, absl::Seconds(1), &duration);
  proto.set_seconds(seconds);
  proto.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(duration)));
  return proto;
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) +
         absl::Nanoseconds(duration.nanos());
}

}  // namespace berth::base
