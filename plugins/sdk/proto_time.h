// Conversions between absl time types and google.protobuf.Timestamp and
// Duration, for drivers filling in berth's messages: base/proto_time.h's,
// under the SDK's namespace so that a driver author needs the SDK only.

#ifndef PLUGINS_SDK_PROTO_TIME_H_
#define PLUGINS_SDK_PROTO_TIME_H_

#include "base/proto_time.h"

namespace berth::plugin {

using ::berth::base::FromProtoDuration;
using ::berth::base::FromProtoTimestamp;
using ::berth::base::ToProtoDuration;
using ::berth::base::ToProtoTimestamp;

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_PROTO_TIME_H_
