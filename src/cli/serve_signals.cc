// `serve`'s signal handling (serve_signals.h).
#include "serve_signals.h"

#include <cstring>
#include <utility>

namespace draguard::cli {

sigset_t BlockSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int sig : {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR,
                  SIGSTKFLT, SIGXCPU}) {
    sigaddset(&sigs, sig);
  }
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&sigs, sig);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  // A peer closing its socket, or a file size limit, must never kill the process.
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
  return sigs;
}

namespace {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

SignalLoop::SignalLoop(const sigset_t& sigs, server::Server& srv, std::function<void()> reload,
                       logging::Logger& logger, std::function<void()> on_drain)
    : sigs_(sigs), srv_(srv), reload_(std::move(reload)), logger_(logger), on_drain_(std::move(on_drain)) {
  thread_ = std::thread([this] { Run(); });
}

SignalLoop::~SignalLoop() {
  stop_.store(true);
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

void SignalLoop::Run() {
  bool draining = false;
  for (;;) {
    int sig = 0;
    if (sigwait(&sigs_, &sig) != 0) continue;
    if (stop_.load()) return;
    if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
      logger_.Info("signal received", {{"signal", SignalName(sig)},
                                       {"action", std::string(draining ? "end the shutdown delay" : "drain")}});
      if (draining) {
        srv_.SkipShutdownDelay();
      } else {
        draining = true;
        srv_.BeginShutdown();
        if (on_drain_) on_drain_();
      }
    } else if (sig == SIGHUP) {
      logger_.Info("signal received", {{"signal", SignalName(sig)}, {"action", std::string("reload")}});
      if (!draining) reload_();
    } else {
      logger_.Info("signal received", {{"signal", SignalName(sig)}, {"action", std::string("ignored")}});
    }
  }
}

std::function<void()> ReloadEverything(policy::PolicyStore& policies, server::Server& srv,
                                       topology::Store& topology_store,
                                       const std::shared_ptr<logging::Logger>& logger) {
  return [&policies, &srv, &topology_store, logger] {
    auto text = [](const Status& st) { return st.ok() ? std::string("ok") : st.message(); };
    const Status p = policies.Reload();
    const Status c = srv.ReloadCertificates();
    const Status t = topology_store.Reload();
    logger->Log(p.ok() && c.ok() && t.ok() ? logging::Level::kInfo : logging::Level::kWarn, "reloaded on SIGHUP",
                {{"policy", text(p)}, {"certificate", text(c)}, {"topology", text(t)}});
  };
}

}  // namespace draguard::cli
