// Conversions between absl time types and google.protobuf.Timestamp and
// Duration, for drivers filling in berth's messages.

#ifndef PLUGINS_SDK_PROTO_TIME_H_
#define PLUGINS_SDK_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace berth::plugin {

google::protobuf::Timestamp ToProtoTimestamp(absl::Time time);
absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& timestamp);

google::protobuf::Duration ToProtoDuration(absl::Duration duration);
absl::Duration FromProtoDuration(const google::protobuf::Duration& duration);

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_PROTO_TIME_H_
