#include "services/common/refusal_log.h"

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/peer_credentials.h"

namespace berth {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr char kSocket[] = "/run/berth/node.sock";
constexpr char kAllowed[] = "root, group berth (gid 990)";

PeerCredentials Peer(uid_t uid, pid_t pid) {
  PeerCredentials peer;
  peer.uid = uid;
  peer.gid = uid;
  peer.pid = pid;
  return peer;
}

// A RefusalLog on a clock the test moves.
class RefusalLogTest : public ::testing::Test {
 protected:
  RefusalLog::Options FakeClock(size_t max_uids = 64) {
    RefusalLog::Options options;
    options.interval = absl::Seconds(60);
    options.max_uids = max_uids;
    options.now = [this] { return now_; };
    return options;
  }
  void Advance(absl::Duration d) { now_ += d; }

  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
};

TEST_F(RefusalLogTest, FirstRefusalOfAUidIsOneFullLine) {
  RefusalLog log(kSocket, kAllowed, FakeClock());
  std::vector<std::string> lines = log.Refused(Peer(1000, 4242));
  ASSERT_THAT(lines, SizeIs(1));
  EXPECT_THAT(lines[0], AllOf(HasSubstr(kSocket), HasSubstr("uid 1000"),
                              HasSubstr("pid 4242"), HasSubstr(kAllowed),
                              HasSubstr("at most once every 1m")));
  EXPECT_EQ(log.tracked_uids(), 1u);
}

TEST_F(RefusalLogTest, LaterRefusalsAreCountedThenSummedUpOncePerInterval) {
  RefusalLog log(kSocket, kAllowed, FakeClock());
  ASSERT_THAT(log.Refused(Peer(1000, 1)), SizeIs(1));
  EXPECT_EQ(log.NextDue(), absl::InfiniteFuture()) << "nothing counted yet";
  const absl::Time first = now_;
  for (int i = 0; i < 500; ++i) {
    Advance(absl::Milliseconds(100));  // 50s in all
    EXPECT_THAT(log.Refused(Peer(1000, 100 + i)), IsEmpty()) << i;
  }
  EXPECT_EQ(log.NextDue(), first + absl::Seconds(60));
  EXPECT_THAT(log.TakeDue(), IsEmpty()) << "not due before 60s";

  Advance(absl::Seconds(10));  // 60s after the first line
  EXPECT_THAT(log.TakeDue(),
              ElementsAre(AllOf(
                  HasSubstr(kSocket),
                  HasSubstr("uid 1000: 500 more connections refused in the "
                            "last 1m"),
                  HasSubstr("pid 599"))));
  EXPECT_EQ(log.NextDue(), absl::InfiniteFuture()) << "the count started over";
  EXPECT_THAT(log.TakeDue(), IsEmpty());

  // A refusal that comes after the interval logs the count itself (its own
  // refusal included).
  Advance(absl::Seconds(1));
  EXPECT_THAT(log.Refused(Peer(1000, 7)), IsEmpty());
  Advance(absl::Seconds(70));
  EXPECT_THAT(log.Refused(Peer(1000, 8)),
              ElementsAre(HasSubstr(
                  "uid 1000: 2 more connections refused in the last 1m11s")));
  Advance(absl::Seconds(59));
  EXPECT_THAT(log.Refused(Peer(1000, 9)), IsEmpty());
  Advance(absl::Seconds(1));
  EXPECT_THAT(log.Refused(Peer(1000, 9)),
              ElementsAre(HasSubstr("uid 1000: 2 more connections")));
}

TEST_F(RefusalLogTest, OneRefusalIsSingular) {
  RefusalLog log(kSocket, kAllowed, FakeClock());
  log.Refused(Peer(1000, 1));
  log.Refused(Peer(1000, 2));
  EXPECT_THAT(log.TakeAll(),
              ElementsAre(HasSubstr("uid 1000: 1 more connection refused")));
}

TEST_F(RefusalLogTest, EachUidHasItsOwnFirstLineAndCount) {
  RefusalLog log(kSocket, kAllowed, FakeClock());
  EXPECT_THAT(log.Refused(Peer(1000, 1)), ElementsAre(HasSubstr("uid 1000")));
  EXPECT_THAT(log.Refused(Peer(1001, 2)), ElementsAre(HasSubstr("uid 1001")));
  for (int i = 0; i < 3; ++i)
    EXPECT_THAT(log.Refused(Peer(1000, 3)), IsEmpty());
  EXPECT_THAT(log.Refused(Peer(1001, 4)), IsEmpty());
  Advance(absl::Seconds(60));
  EXPECT_THAT(log.TakeDue(), ElementsAre(HasSubstr("uid 1000: 3 more"),
                                         HasSubstr("uid 1001: 1 more")));
}

TEST_F(RefusalLogTest, TakeAllReportsCountsNotYetDue) {
  RefusalLog log(kSocket, kAllowed, FakeClock());
  EXPECT_THAT(log.TakeAll(), IsEmpty());
  log.Refused(Peer(1000, 1));
  EXPECT_THAT(log.TakeAll(), IsEmpty()) << "only the first line: no count";
  Advance(absl::Seconds(5));
  log.Refused(Peer(1000, 2));
  log.Refused(Peer(1000, 3));
  EXPECT_THAT(log.TakeAll(),
              ElementsAre(HasSubstr("uid 1000: 2 more connections refused "
                                    "in the last 5s")));
  EXPECT_THAT(log.TakeAll(), IsEmpty());
}

TEST_F(RefusalLogTest, TrackedUidsAreBoundedAndTheRestCountedTogether) {
  RefusalLog log(kSocket, kAllowed, FakeClock(/*max_uids=*/3));
  for (uid_t uid = 1000; uid < 1003; ++uid) {
    EXPECT_THAT(log.Refused(Peer(uid, 1)), SizeIs(1)) << uid;
  }
  // The table is full of uids refused lately: one line for the first uid
  // beyond them, then a count for all such uids.
  EXPECT_THAT(log.Refused(Peer(2000, 5)),
              ElementsAre(AllOf(HasSubstr("uid 2000"), HasSubstr("pid 5"),
                                HasSubstr("3 other uids"))));
  for (uid_t uid = 2001; uid < 12001; ++uid) {
    EXPECT_THAT(log.Refused(Peer(uid, 6)), IsEmpty()) << uid;
  }
  EXPECT_EQ(log.tracked_uids(), 3u);
  Advance(absl::Seconds(60));
  EXPECT_THAT(log.TakeDue(),
              ElementsAre(AllOf(HasSubstr("10000 more connections of "
                                          "untracked uids refused"),
                                HasSubstr("uid 12000"))));
  EXPECT_EQ(log.tracked_uids(), 3u);
}

TEST_F(RefusalLogTest, AnIdleUidGivesUpItsPlace) {
  RefusalLog log(kSocket, kAllowed, FakeClock(/*max_uids=*/2));
  log.Refused(Peer(1000, 1));
  Advance(absl::Seconds(1));
  log.Refused(Peer(1001, 1));
  Advance(absl::Seconds(1));
  log.Refused(Peer(1001, 2));  // counted: 1001 is not idle
  Advance(absl::Seconds(59));
  // 1000 has been idle for 60s: the new uid takes its place.
  EXPECT_THAT(
      log.Refused(Peer(1002, 3)),
      ElementsAre(AllOf(HasSubstr("uid 1002"), Not(HasSubstr("other uids")))));
  EXPECT_EQ(log.tracked_uids(), 2u);
  // 1001's count was kept.
  EXPECT_THAT(log.TakeAll(), ElementsAre(HasSubstr("uid 1001: 1 more")));
  // 1000 comes back: a first line again, for the place 1001 left idle.
  Advance(absl::Seconds(60));
  EXPECT_THAT(log.Refused(Peer(1000, 4)),
              ElementsAre(HasSubstr("refusing the calls of uid 1000")));
  EXPECT_EQ(log.tracked_uids(), 2u);
}

TEST_F(RefusalLogTest, NoUidIsTrackedTwiceAndZeroMaxMeansOne) {
  RefusalLog log(kSocket, kAllowed, FakeClock(/*max_uids=*/0));
  EXPECT_THAT(log.Refused(Peer(1000, 1)), SizeIs(1));
  EXPECT_THAT(log.Refused(Peer(1000, 1)), IsEmpty());
  EXPECT_EQ(log.tracked_uids(), 1u);
}

}  // namespace
}  // namespace berth
