// Internal to the CLI: the signal handling of `serve` (serve_signals.cc).
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "draguard/logging/logger.h"
#include "draguard/policy/store.h"
#include "draguard/server/server.h"
#include "draguard/topology/store.h"

namespace draguard::cli {

/// Blocks every asynchronous signal whose default action ends the process, except SIGKILL (and
/// SIGPIPE and SIGXFSZ, ignored), so that SignalLoop takes them by sigwait(), never a default
/// action. Call before any thread starts so that every thread inherits the mask; returns the set.
sigset_t BlockSignals();

/// The signal thread of `serve`: SIGTERM, SIGINT and SIGQUIT start the drain (readiness off,
/// --shutdown-delay, in-flight requests finish) and call `on_drain` once, and a second one ends the
/// delay early; SIGHUP runs `reload`; every other blocked signal is logged and ignored.
class SignalLoop {
 public:
  /// Starts the thread, which waits for the signals of `sigs` (from BlockSignals). `on_drain` may
  /// be empty; it must not block (it runs on the signal thread).
  SignalLoop(const sigset_t& sigs, server::Server& srv, std::function<void()> reload, logging::Logger& logger,
             std::function<void()> on_drain = nullptr);
  /// Ends the loop (it wakes up on a signal sent to its own thread).
  ~SignalLoop();
  SignalLoop(const SignalLoop&) = delete;
  SignalLoop& operator=(const SignalLoop&) = delete;

 private:
  void Run();

  sigset_t sigs_;
  server::Server& srv_;
  std::function<void()> reload_;
  logging::Logger& logger_;
  std::function<void()> on_drain_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// SIGHUP: re-reads the policy file, the serving certificate and the topology source now. Each
/// outcome is also logged by its own reload reporter; a failure keeps what serves.
std::function<void()> ReloadEverything(policy::PolicyStore& policies, server::Server& srv,
                                       topology::Store& topology_store,
                                       const std::shared_ptr<logging::Logger>& logger);

}  // namespace draguard::cli
