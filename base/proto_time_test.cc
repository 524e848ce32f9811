#include "base/proto_time.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace berth::base {
namespace {

TEST(ProtoTimeTest, TimestampsRoundTrip) {
  const absl::Time time =
      absl::FromUnixSeconds(1764600000) + absl::Nanoseconds(123456789);
  const google::protobuf::Timestamp proto = ToProtoTimestamp(time);
  EXPECT_EQ(proto.seconds(), 1764600000);
  EXPECT_EQ(proto.nanos(), 123456789);
  EXPECT_EQ(FromProtoTimestamp(proto), time);
}

TEST(ProtoTimeTest, TimesBeforeTheEpochKeepNanosPositive) {
  const absl::Time time = absl::FromUnixSeconds(-2) + absl::Milliseconds(250);
  const google::protobuf::Timestamp proto = ToProtoTimestamp(time);
  EXPECT_EQ(proto.seconds(), -2);
  EXPECT_EQ(proto.nanos(), 250'000'000);
  EXPECT_EQ(FromProtoTimestamp(proto), time);
}

TEST(ProtoTimeTest, DurationsRoundTrip) {
  for (absl::Duration d : {absl::ZeroDuration(), absl::Milliseconds(1500),
                           -absl::Milliseconds(1500), absl::Hours(25)}) {
    const google::protobuf::Duration proto = ToProtoDuration(d);
    EXPECT_EQ(FromProtoDuration(proto), d) << d;
    // Seconds and nanos carry one sign (the proto's rule).
    EXPECT_TRUE((proto.seconds() >= 0 && proto.nanos() >= 0) ||
                (proto.seconds() <= 0 && proto.nanos() <= 0))
        << d;
  }
  EXPECT_EQ(ToProtoDuration(absl::Milliseconds(1500)).nanos(), 500'000'000);
}

}  // namespace
}  // namespace berth::base
