// The sequence every daemon of the project runs (the device plugins, the
// DRA drivers, the host's serve), and its parts: shutdown signals, the
// open-file limit, gRPC's polling engine, the exit deadline. plugin_runner.h
// includes this header, so plugins that include it see them as before.
//
//   int Run(const Options& options, const char* argv0) {
//     common::DaemonProcess process{.verbosity = options.verbosity};
//     common::SetUpDaemon(argv0, process);  // before any thread
//     ... start ...
//     common::AwaitShutdown(process);       // SIGTERM or SIGINT
//     ... stop ...
//   }
#ifndef TOPOLOGY_COMMON_DAEMON_H_
#define TOPOLOGY_COMMON_DAEMON_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace topology::common {

// How a daemon's process is set up and stopped.
struct DaemonProcess {
  int verbosity = 0;  // klog's -v
  // gRPC's polling engine (ChooseGrpcPollEngine); "epoll1" for servers
  // handed their connections by descriptor.
  std::string grpc_engine = "poll";
  // The orderly stop's bound after the signal (within the kubelet's and
  // the container runtime's grace), and the exit status past it.
  std::chrono::milliseconds stop_limit{4500};
  int stuck_exit_code = 0;
  // Blocks from this size up are mapped on their own and a heap's free top
  // from this size up is given back (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD),
  // fixed; 0 keeps glibc's dynamic thresholds. Under those, freeing one big
  // block (a parsed answer's buffer) raises both for the process's life,
  // and a thread's heap then keeps megabytes free at its top that
  // malloc_trim does not give back (it trims only the main heap's top).
  size_t malloc_release_threshold = 0;
};

// The process set up, in this order, before any thread exists: files and
// sockets get explicit modes (a umask of 077 covers the window before),
// malloc's thresholds, gRPC's polling engine, the klog-format log
// (InitLogging), the shutdown signals blocked, the open-file limit raised.
void SetUpDaemon(const char* argv0, const DaemonProcess& process);

// Returns once SIGTERM or SIGINT arrived, said in the log, with the stop's
// bound armed (ExitIfStillRunningAfter).
void AwaitShutdown(const DaemonProcess& process);

// Blocks SIGTERM and SIGINT in the calling thread and every thread it
// creates afterwards; call first in main(). WaitForShutdownSignal() then
// returns the signal that arrived.
void BlockShutdownSignals();
int WaitForShutdownSignal();

// Raises the soft limit on open files to the hard limit (as the Go runtime
// does for the kubelet), so that many idle connections do not starve the
// daemon of descriptors. Returns the new soft limit.
uint64_t RaiseOpenFileLimit();

// Selects gRPC's "poll" polling engine (or `engine`) for this process, unless
// the GRPC_POLL_STRATEGY environment variable already names one (the operator's
// choice wins; empty names none), and returns the engine gRPC will use. Call
// first in main(), before any gRPC object or other thread exists: gRPC reads
// the variable once, when it starts. With gRPC's default engine on Linux
// (epoll1), one thread at a time waits on every connection of the process and
// hands what it reads to the thread waiting for it; a daemon with a few
// connections and a thread blocked on each stream pays those hand-offs on every
// call (docs/performance.md: twice the context switches per admission, and a
// higher idle CPU). Under poll a connection is read only by the threads waiting
// on it: a client connection with no call on it is not read at all, so a client
// lets go of a connection it no longer uses (the host's plugin endpoints do)
// rather than leave a server's shutdown waiting for its goodbye to be read. A
// server that is handed its connections by descriptor
// (grpc::AddInsecureChannelFromFd) needs "epoll1": under poll such a connection
// is not read while its first call is being handled, so a second call on it
// waits for the first.
std::string ChooseGrpcPollEngine(const std::string& engine = "poll");

// Unmaps the read-only segments of the program and its shared libraries
// (code, constants, unwind tables) from this process, and returns the bytes
// that were mapped there. They stay in the page cache: what runs afterwards
// is mapped again from it on demand, a minor fault per 64 KB window. A
// statically linked gRPC program touches most of its 10-14 MB of text while
// it starts (every gRPC plugin registers itself, TLS and the first
// connections set up), and the kernel keeps all of it resident for the
// process's life; a daemon calls this once, after its start-up and first
// pass of work, so that its resident memory is what its steady work touches.
// Only segments nothing writes are released (no text relocations, outside
// RELRO): their pages read back exactly as they were. Never the vDSO.
size_t ReleaseStartupCode();

// After a shutdown signal: ends the process with `exit_code` if the orderly
// stop has not returned within `limit`, whatever state it is stuck in.
void ExitIfStillRunningAfter(std::chrono::milliseconds limit, int exit_code);

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_DAEMON_H_
