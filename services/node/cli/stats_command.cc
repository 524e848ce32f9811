// `berth stats`: one TaskStats stream per task, a table redrawn in place
// or JSON lines (cli.h).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "berth/stats/v1/stats.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/table.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;
namespace statspb = ::berth::stats::v1;

// ANSI: cursor home, then clear the screen.
constexpr char kClearScreen[] = "\033[H\033[2J";

}  // namespace

class Cli::StatsSession {
 public:
  StatsSession(Cli* cli, std::vector<StatsTarget> targets, bool no_stream,
               bool json)
      : cli_(cli),
        targets_(std::move(targets)),
        no_stream_(no_stream),
        json_(json),
        samples_(targets_.size()),
        ended_(targets_.size(), false),
        contexts_(targets_.size()) {}

  int Run() {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < targets_.size(); ++i) {
      contexts_[i] = std::make_unique<grpc::ClientContext>();
      threads.emplace_back([this, i] { Follow(i); });
    }
    {
      absl::MutexLock lock(&mu_);
      if (no_stream_) {
        mu_.Await(absl::Condition(this, &StatsSession::AllSampledOrEnded));
        if (!json_) cli_->Out(RenderTable(/*all=*/true));
      } else {
        while (!AllEnded()) {
          mu_.AwaitWithTimeout(absl::Condition(this, &StatsSession::AllEnded),
                               cli_->env_.stats_refresh);
          if (!json_ && !AllEnded()) {
            cli_->Out(absl::StrCat(kClearScreen, RenderTable(/*all=*/false)));
          }
        }
      }
    }
    for (auto& context : contexts_) context->TryCancel();
    for (std::thread& thread : threads) thread.join();
    absl::MutexLock lock(&mu_);
    if (targets_.empty() && !json_ && !no_stream_) {
      cli_->Out(RenderTable(/*all=*/true));  // the header alone
    }
    int code = kExitOk;
    for (const std::string& error : errors_) code = cli_->Fail(error);
    return code;
  }

 private:
  void Follow(size_t i) {
    nodepb::TaskStatsRequest request;
    request.set_task_id(targets_[i].id);
    std::unique_ptr<grpc::ClientReader<nodepb::TaskStatsResponse>> reader =
        cli_->stub_->TaskStats(contexts_[i].get(), request);
    nodepb::TaskStatsResponse response;
    bool cancelled = false;
    while (reader->Read(&response)) {
      absl::MutexLock lock(&mu_);
      if (json_ && (!no_stream_ || !samples_[i].has_value())) {
        absl::StatusOr<std::string> line = ToJson(response.usage(), false);
        if (line.ok()) cli_->Out(*line);
      }
      samples_[i] = response.usage();
      if (no_stream_) {
        contexts_[i]->TryCancel();
        cancelled = true;
        break;
      }
    }
    grpc::Status status = reader->Finish();
    absl::MutexLock lock(&mu_);
    ended_[i] = true;
    if (!status.ok() && !cancelled &&
        status.error_code() != grpc::StatusCode::CANCELLED) {
      errors_.push_back(status.error_message());
    }
  }

  bool AllEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::all_of(ended_.begin(), ended_.end(), [](bool e) { return e; });
  }

  bool AllSampledOrEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (!ended_[i] && !samples_[i].has_value()) return false;
    }
    return true;
  }

  // Tasks (threads included) as the cgroup counts them; else the
  // processes a procfs sample lists; else unknown.
  static std::string PidsColumn(const statspb::TaskResourceUsage& sample) {
    const statspb::PidsStats& pids = sample.usage().pids();
    if (std::find(pids.measured().begin(), pids.measured().end(),
                  statspb::PIDS_FIELD_CURRENT) != pids.measured().end()) {
      return absl::StrCat(pids.current());
    }
    if (!sample.processes().empty()) {
      return absl::StrCat(sample.processes_size());
    }
    return "--";
  }

  // The table of the tasks sampled (and, unless `all`, still streaming).
  std::string RenderTable(bool all) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Table table(
        {"TASK", "NAME", "CPU %", "MEM USAGE / LIMIT", "MEM %", "PIDS"});
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (!samples_[i].has_value() || (!all && ended_[i])) continue;
      const StatsTarget& target = targets_[i];
      const statspb::TaskResourceUsage& sample = *samples_[i];
      const statspb::MemoryStats& memory = sample.usage().memory();
      const uint64_t used = memory.usage() != 0 ? memory.usage() : memory.rss();
      const std::string limit =
          target.memory_limit != 0 ? HumanBytes(target.memory_limit) : "--";
      const std::string percent =
          target.memory_limit != 0
              ? absl::StrFormat("%.2f%%",
                                100.0 * static_cast<double>(used) /
                                    static_cast<double>(target.memory_limit))
              : "--";
      table.AddRow({ShortId(target.id), target.name,
                    absl::StrFormat("%.2f%%", sample.usage().cpu().percent()),
                    absl::StrCat(HumanBytes(used), " / ", limit), percent,
                    PidsColumn(sample)});
    }
    return table.Render();
  }

  Cli* const cli_;
  const std::vector<StatsTarget> targets_;
  const bool no_stream_;
  const bool json_;
  mutable absl::Mutex mu_;
  std::vector<std::optional<statspb::TaskResourceUsage>> samples_
      ABSL_GUARDED_BY(mu_);
  std::vector<bool> ended_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
};

int Cli::Stats(const ParsedArgs& args) {
  if (!Connect()) return Unreachable();
  std::vector<StatsTarget> targets;
  if (args.positional.empty()) {
    grpc::ClientContext context;
    SetDeadline(&context);
    nodepb::ListTasksResponse response;
    grpc::Status status =
        stub_->ListTasks(&context, nodepb::ListTasksRequest(), &response);
    if (!status.ok()) return NodeError(status);
    for (const nodepb::Task& task : response.tasks()) {
      if (task.state() != nodepb::TASK_STATE_RUNNING) continue;
      targets.push_back({task.id(), task.spec().name(),
                         task.spec().resources().memory_bytes()});
    }
  } else {
    for (const std::string& name : args.positional) {
      nodepb::Task task;
      grpc::Status status = Inspect(name, &task);
      if (!status.ok()) return NodeError(status);
      targets.push_back({task.id(), task.spec().name(),
                         task.spec().resources().memory_bytes()});
    }
  }
  StatsSession session(this, std::move(targets), args.Has("no-stream"),
                       args.Has("json"));
  return session.Run();
}

}  // namespace berth::cli
