#include "services/driver/common/attach_hub.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace berth::driver_common {
namespace {

void PutUint32(std::string* out, uint32_t value) {
  const char bytes[4] = {
      static_cast<char>(value >> 24), static_cast<char>(value >> 16),
      static_cast<char>(value >> 8), static_cast<char>(value)};
  out->append(bytes, 4);
}

uint32_t GetUint32(const char* data) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(data);
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
         (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
}

void AppendFrame(std::string* out, AttachFrameType type, const char* data,
                 size_t size) {
  out->push_back(static_cast<char>(type));
  PutUint32(out, static_cast<uint32_t>(size));
  out->append(data, size);
}

std::string SizePayload(uint32_t rows, uint32_t columns) {
  std::string payload;
  PutUint32(&payload, rows);
  PutUint32(&payload, columns);
  return payload;
}

bool KnownType(uint8_t type) {
  switch (static_cast<AttachFrameType>(type)) {
    case AttachFrameType::kHello:
    case AttachFrameType::kStdin:
    case AttachFrameType::kStdinClose:
    case AttachFrameType::kResize:
    case AttachFrameType::kStdout:
    case AttachFrameType::kStderr:
    case AttachFrameType::kExit:
      return true;
  }
  return false;
}

int64_t MonotonicMillis() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

void AppendAttachFrames(std::string* out, AttachFrameType type,
                        const char* data, size_t size) {
  if (size == 0) {
    AppendFrame(out, type, data, 0);
    return;
  }
  while (size > 0) {
    const size_t n = std::min(size, kAttachMaxPayloadBytes);
    AppendFrame(out, type, data, n);
    data += n;
    size -= n;
  }
}

std::string EncodeAttachHello(bool send_stdin, uint32_t rows,
                              uint32_t columns) {
  std::string payload(1, send_stdin ? '\1' : '\0');
  payload += SizePayload(rows, columns);
  std::string frame;
  AppendFrame(&frame, AttachFrameType::kHello, payload.data(), payload.size());
  return frame;
}

std::string EncodeAttachResize(uint32_t rows, uint32_t columns) {
  const std::string payload = SizePayload(rows, columns);
  std::string frame;
  AppendFrame(&frame, AttachFrameType::kResize, payload.data(), payload.size());
  return frame;
}

std::string EncodeAttachExit(int32_t exit_code, int32_t signal) {
  const std::string payload = SizePayload(static_cast<uint32_t>(exit_code),
                                          static_cast<uint32_t>(signal));
  std::string frame;
  AppendFrame(&frame, AttachFrameType::kExit, payload.data(), payload.size());
  return frame;
}

bool DecodeAttachHello(const std::string& payload, bool* send_stdin,
                       uint32_t* rows, uint32_t* columns) {
  if (payload.size() != 9) return false;
  *send_stdin = (payload[0] & 1) != 0;
  *rows = GetUint32(payload.data() + 1);
  *columns = GetUint32(payload.data() + 5);
  return true;
}

bool DecodeAttachSize(const std::string& payload, uint32_t* rows,
                      uint32_t* columns) {
  if (payload.size() != 8) return false;
  *rows = GetUint32(payload.data());
  *columns = GetUint32(payload.data() + 4);
  return true;
}

bool DecodeAttachExit(const std::string& payload, int32_t* exit_code,
                      int32_t* signal) {
  if (payload.size() != 8) return false;
  *exit_code = static_cast<int32_t>(GetUint32(payload.data()));
  *signal = static_cast<int32_t>(GetUint32(payload.data() + 4));
  return true;
}

void AttachFrameReader::Feed(const char* data, size_t size) {
  if (offset_ > 0 && offset_ >= buffer_.size() / 2) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  buffer_.append(data, size);
}

bool AttachFrameReader::Next(AttachFrameType* type, std::string* payload,
                             bool* malformed) {
  *malformed = false;
  const size_t available = buffer_.size() - offset_;
  if (available < kAttachHeaderBytes) return false;
  const char* header = buffer_.data() + offset_;
  const uint32_t length = GetUint32(header + 1);
  if (!KnownType(static_cast<uint8_t>(header[0])) ||
      length > kAttachMaxPayloadBytes) {
    *malformed = true;
    return false;
  }
  if (available < kAttachHeaderBytes + length) return false;
  *type = static_cast<AttachFrameType>(header[0]);
  payload->assign(header + kAttachHeaderBytes, length);
  offset_ += kAttachHeaderBytes + length;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  return true;
}

// One connected caller.
struct AttachHub::Client {
  int fd = -1;
  AttachFrameReader reader;
  // Frames not written yet: `queue` from `sent`.
  std::string queue;
  size_t sent = 0;
  bool dropped = false;
  // After Exit: closed once `queue` is written.
  bool closing = false;

  size_t backlog() const { return queue.size() - sent; }
};

AttachHub::AttachHub(const Options& options) : options_(options) {
  if (options_.listen_fd >= 0) {
    fcntl(options_.listen_fd, F_SETFL,
          fcntl(options_.listen_fd, F_GETFL) | O_NONBLOCK);
  }
  if (options_.stdin_fd >= 0) {
    stdin_target_ = options_.stdin_fd;
  } else if (options_.terminal_fd >= 0 && options_.terminal_stdin) {
    stdin_target_ = options_.terminal_fd;
  }
  if (stdin_target_ >= 0) {
    fcntl(stdin_target_, F_SETFL, fcntl(stdin_target_, F_GETFL) | O_NONBLOCK);
  } else {
    stdin_closed_ = true;
  }
}

AttachHub::~AttachHub() {
  for (auto& client : clients_) {
    if (client->fd >= 0) close(client->fd);
  }
  if (options_.listen_fd >= 0) close(options_.listen_fd);
  if (options_.stdin_fd >= 0) close(options_.stdin_fd);
}

bool AttachHub::stdin_open() const { return !stdin_closed_; }

size_t AttachHub::client_count() const {
  return static_cast<size_t>(std::count_if(
      clients_.begin(), clients_.end(),
      [](const std::unique_ptr<Client>& client) { return !client->dropped; }));
}

size_t AttachHub::AddPollFds(std::vector<struct pollfd>* fds) {
  polled_.clear();
  RemoveDropped();
  if (options_.listen_fd >= 0 && !exited_) {
    fds->push_back({options_.listen_fd, POLLIN, 0});
    polled_.push_back({Polled::Kind::kListen, nullptr});
  }
  if (!stdin_closed_ && !stdin_pending_.empty()) {
    fds->push_back({stdin_target_, POLLOUT, 0});
    polled_.push_back({Polled::Kind::kStdin, nullptr});
  }
  // Callers are not read while their stdin waits for room.
  const bool read_clients =
      !exited_ && stdin_pending_.size() < kAttachMaxStdinBytes;
  for (auto& client : clients_) {
    short events = 0;
    if (read_clients) events |= POLLIN;
    if (client->backlog() > 0) events |= POLLOUT;
    fds->push_back({client->fd, events, 0});
    polled_.push_back({Polled::Kind::kClient, client.get()});
  }
  return polled_.size();
}

void AttachHub::HandlePoll(const struct pollfd* fds, size_t count) {
  const size_t n = std::min(count, polled_.size());
  bool accept = false;
  for (size_t i = 0; i < n; ++i) {
    const short revents = fds[i].revents;
    if (revents == 0) continue;
    const Polled& polled = polled_[i];
    switch (polled.kind) {
      case Polled::Kind::kListen:
        accept = true;
        break;
      case Polled::Kind::kStdin:
        WriteStdin();
        break;
      case Polled::Kind::kClient: {
        Client* client = polled.client;
        if (client->dropped) break;
        if ((revents & POLLOUT) != 0 && !WriteClient(client)) break;
        if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) ReadClient(client);
        break;
      }
    }
  }
  polled_.clear();
  RemoveDropped();
  if (accept) Accept();
}

void AttachHub::Accept() {
  while (true) {
    const int fd = accept4(options_.listen_fd, nullptr, nullptr,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or nothing we can do about it now
    }
    auto client = std::make_unique<Client>();
    client->fd = fd;
    Client* added = client.get();
    clients_.push_back(std::move(client));
    if (!first_client_seen_) {
      first_client_seen_ = true;
      std::string frames;
      for (const auto& [stream, bytes] : replay_) {
        AppendAttachFrames(&frames,
                           stream == AttachStream::kStdout
                               ? AttachFrameType::kStdout
                               : AttachFrameType::kStderr,
                           bytes.data(), bytes.size());
      }
      replay_.clear();
      replay_size_ = 0;
      Queue(added, frames);
      WriteClient(added);
    }
  }
}

void AttachHub::ReadClient(Client* client) {
  char buffer[65536];
  while (!client->dropped) {
    const ssize_t n = recv(client->fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      client->reader.Feed(buffer, static_cast<size_t>(n));
      AttachFrameType type;
      std::string payload;
      bool malformed = false;
      // A frame that drops the caller (a bad hello) ends it: what it sent
      // after, already read, is not acted on.
      while (!client->dropped &&
             client->reader.Next(&type, &payload, &malformed)) {
        HandleFrame(client, type, payload);
      }
      if (malformed) Drop(client);
      // Stop while stdin waits for room: the caller is held back.
      if (stdin_pending_.size() >= kAttachMaxStdinBytes) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Drop(client);  // end of file or an error: the caller is gone
  }
}

void AttachHub::HandleFrame(Client* client, AttachFrameType type,
                            const std::string& payload) {
  uint32_t rows = 0, columns = 0;
  switch (type) {
    case AttachFrameType::kHello: {
      bool send_stdin = false;
      if (!DecodeAttachHello(payload, &send_stdin, &rows, &columns)) {
        Drop(client);
        return;
      }
      if (rows != 0 && columns != 0) Resize(rows, columns);
      return;
    }
    case AttachFrameType::kStdin:
      QueueStdin(payload);
      return;
    case AttachFrameType::kStdinClose:
      CloseStdin();
      return;
    case AttachFrameType::kResize:
      if (DecodeAttachSize(payload, &rows, &columns)) Resize(rows, columns);
      return;
    default:
      return;  // the holder's own frames: ignored
  }
}

void AttachHub::Resize(uint32_t rows, uint32_t columns) {
  if (rows == 0 || columns == 0) return;
  if (options_.on_resize) options_.on_resize(rows, columns);
  if (options_.terminal_fd < 0) return;
  struct winsize size;
  std::memset(&size, 0, sizeof(size));
  size.ws_row = static_cast<unsigned short>(std::min<uint32_t>(rows, 65535));
  size.ws_col = static_cast<unsigned short>(std::min<uint32_t>(columns, 65535));
  ioctl(options_.terminal_fd, TIOCSWINSZ, &size);
}

void AttachHub::QueueStdin(const std::string& data) {
  if (stdin_closed_ || stdin_close_pending_) return;
  stdin_pending_ += data;
  WriteStdin();
}

void AttachHub::CloseStdin() {
  if (stdin_closed_ || stdin_close_pending_) return;
  if (options_.stdin_fd < 0) {
    // A terminal stays open (closing its master would hang it up): its
    // program reads end-of-file from the EOF character, in canonical mode.
    struct termios attributes;
    if (tcgetattr(stdin_target_, &attributes) == 0 &&
        (attributes.c_lflag & ICANON) != 0) {
      stdin_pending_.push_back(static_cast<char>(attributes.c_cc[VEOF]));
      WriteStdin();
    }
    return;
  }
  stdin_close_pending_ = true;
  WriteStdin();
}

void AttachHub::WriteStdin() {
  while (!stdin_closed_ && !stdin_pending_.empty()) {
    const ssize_t n =
        write(stdin_target_, stdin_pending_.data(), stdin_pending_.size());
    if (n > 0) {
      stdin_pending_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // The reader is gone (EPIPE, EIO): nothing more goes there.
    stdin_pending_.clear();
    stdin_close_pending_ = options_.stdin_fd >= 0;
    if (options_.stdin_fd < 0) stdin_closed_ = true;
    break;
  }
  if (stdin_close_pending_ && stdin_pending_.empty() && !stdin_closed_) {
    close(options_.stdin_fd);
    options_.stdin_fd = -1;
    stdin_target_ = -1;
    stdin_closed_ = true;
    stdin_close_pending_ = false;
  }
}

void AttachHub::Output(AttachStream stream, const char* data, size_t size) {
  if (size == 0 || exited_) return;
  if (!first_client_seen_) {
    if (options_.replay_bytes == 0) return;
    if (size >= options_.replay_bytes) {
      replay_.clear();
      replay_.emplace_back(stream,
                           std::string(data + size - options_.replay_bytes,
                                       options_.replay_bytes));
      replay_size_ = options_.replay_bytes;
      return;
    }
    if (!replay_.empty() && replay_.back().first == stream &&
        replay_.back().second.size() < kAttachMaxPayloadBytes) {
      replay_.back().second.append(data, size);
    } else {
      replay_.emplace_back(stream, std::string(data, size));
    }
    replay_size_ += size;
    while (replay_size_ > options_.replay_bytes) {
      const size_t excess = replay_size_ - options_.replay_bytes;
      std::string& front = replay_.front().second;
      if (front.size() <= excess) {
        replay_size_ -= front.size();
        replay_.pop_front();
      } else {
        front.erase(0, excess);
        replay_size_ -= excess;
      }
    }
    return;
  }
  if (clients_.empty()) return;
  std::string frames;
  AppendAttachFrames(&frames,
                     stream == AttachStream::kStdout ? AttachFrameType::kStdout
                                                     : AttachFrameType::kStderr,
                     data, size);
  for (auto& client : clients_) {
    Queue(client.get(), frames);
    if (!client->dropped) WriteClient(client.get());
  }
}

void AttachHub::Exit(int exit_code, int signal) {
  if (exited_) return;
  exited_ = true;
  const std::string frame = EncodeAttachExit(exit_code, signal);
  for (auto& client : clients_) {
    client->closing = true;
    Queue(client.get(), frame);
    if (!client->dropped) WriteClient(client.get());
  }
  if (options_.listen_fd >= 0) {
    close(options_.listen_fd);
    options_.listen_fd = -1;
  }
}

void AttachHub::Flush(int timeout_ms) {
  const int64_t deadline = MonotonicMillis() + timeout_ms;
  polled_.clear();
  RemoveDropped();
  while (!clients_.empty()) {
    const int64_t left = deadline - MonotonicMillis();
    if (left <= 0) break;
    std::vector<struct pollfd> fds;
    for (auto& client : clients_) {
      fds.push_back({client->fd, POLLOUT, 0});
    }
    if (poll(fds.data(), fds.size(), static_cast<int>(left)) < 0 &&
        errno != EINTR) {
      break;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) WriteClient(clients_[i].get());
    }
    RemoveDropped();
  }
  for (auto& client : clients_) Drop(client.get());
  RemoveDropped();
}

void AttachHub::Queue(Client* client, const std::string& frames) {
  if (client->dropped || frames.empty()) return;
  if (client->backlog() + frames.size() > options_.max_backlog_bytes) {
    // Too far behind: the program's output does not wait for it.
    Drop(client);
    return;
  }
  if (client->sent > 0 && client->sent >= client->queue.size() / 2) {
    client->queue.erase(0, client->sent);
    client->sent = 0;
  }
  client->queue += frames;
}

bool AttachHub::WriteClient(Client* client) {
  while (client->backlog() > 0) {
    const ssize_t n = send(client->fd, client->queue.data() + client->sent,
                           client->backlog(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      client->sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    Drop(client);
    return false;
  }
  client->queue.clear();
  client->sent = 0;
  if (client->closing) {
    Drop(client);
    return false;
  }
  return true;
}

void AttachHub::Drop(Client* client) {
  if (client->dropped) return;
  client->dropped = true;
  close(client->fd);
  client->fd = -1;
}

void AttachHub::RemoveDropped() {
  // Entries of polled_ point at clients until HandlePoll has run.
  if (!polled_.empty()) return;
  clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                [](const std::unique_ptr<Client>& client) {
                                  return client->dropped;
                                }),
                 clients_.end());
}

}  // namespace berth::driver_common
