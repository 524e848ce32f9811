// Conversions between absl time types and google.protobuf.Timestamp and
// Duration, for whoever fills in or reads berth's messages. The one target of
// base/ that links protobuf (its well-known types only).

#ifndef BASE_PROTO_TIME_H_
#define BASE_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace berth::base {

google::protobuf::Timestamp ToProtoTimestamp(absl::Time time);
absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& timestamp);

google::protobuf::Duration ToProtoDuration(absl::Duration duration);
absl::Duration FromProtoDuration(const google::protobuf::Duration& duration);

}  // namespace berth::base

#endif  // BASE_PROTO_TIME_H_
