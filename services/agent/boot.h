// berth-agent-boot (boot_main.cc): how the sandbox driver starts berth-agent
// inside a task's root that need not hold the agent's loader and libraries
// (an image). The driver binds them read-only, with the agent's binary and
// socket directory, into one tmpfs in the root (kAgentDirInRoot in its code,
// /run/berth-agent); berth-task-init executes the static berth-agent-boot
// from there, which keeps the task's root open as kAgentBootRootFd, binds
// the root's /proc (the sandbox's) at DIR/proc, makes that tmpfs its root
// (chroot) and executes the agent in it. The dynamic
// loader and every library the agent maps then come from the host's files,
// and nothing of the task's root (an image's /etc/ld.so.preload,
// ld.so.cache, nsswitch.conf, libraries) is read while it loads. The agent,
// given --enter_root_fd=kAgentBootRootFd, enters the task's root again
// before it does anything else (EnterRootFromDescriptor).
//
// usage: berth-agent-boot DIR PROGRAM [ARG...]
//   DIR      the directory to make the root (absolute, in the current root);
//   PROGRAM  the program to execute, a path inside DIR, with ARGs as its
//            argv[1...] (its argv[0] is PROGRAM).
// Exit 2 on bad usage, 127 when a step fails (named on stderr).

#ifndef SERVICES_AGENT_BOOT_H_
#define SERVICES_AGENT_BOOT_H_

namespace berth::agent {

// The descriptor (O_PATH, a directory) of the root berth-agent-boot was
// started in, open in the program it executes.
inline constexpr int kAgentBootRootFd = 3;

// The binary's file name, next to berth-agent's.
inline constexpr char kAgentBootName[] = "berth-agent-boot";

// Makes the directory open as `fd` the calling process's root and working
// directory ("/"), then closes `fd`. Needs CAP_SYS_CHROOT. False with errno
// set when a step fails (`fd` is closed only on success).
bool EnterRootFromDescriptor(int fd);

}  // namespace berth::agent

#endif  // SERVICES_AGENT_BOOT_H_
