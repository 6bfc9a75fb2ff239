// draguard: GPU allocation policy webhook for Kubernetes DRA.
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << draguard::cli::UsageText();
    return draguard::cli::kExitUsage;
  }
  std::string cmd = args.front();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << draguard::cli::UsageText();
    return draguard::cli::kExitOk;
  }
  // Every subcommand answers --help/-h with its part of the usage (`topology` has its own).
  const bool known = cmd == "serve" || cmd == "review" || cmd == "convert" || cmd == "audit" || cmd == "render" ||
                     cmd == "cel" || cmd == "backstop" || cmd == "uninstall-webhooks" || cmd == "selftest" ||
                     cmd == "version";
  if (known) {
    for (const auto& a : rest) {
      if (a == "--help" || a == "-h") {
        std::cout << draguard::cli::CommandUsage(cmd);
        return draguard::cli::kExitOk;
      }
    }
  }
  if (cmd == "version" || cmd == "--version") {
    std::cout << "draguard " << DRAGUARD_VERSION << "\n";
    return draguard::cli::kExitOk;
  }
  if (cmd == "serve") return draguard::cli::Serve(rest, std::cout, std::cerr);
  if (cmd == "review") return draguard::cli::Review(rest, std::cin, std::cout, std::cerr);
  if (cmd == "convert") return draguard::cli::Convert(rest, std::cin, std::cout, std::cerr);
  if (cmd == "audit") return draguard::cli::Audit(rest, std::cin, std::cout, std::cerr);
  if (cmd == "render") return draguard::cli::Render(rest, std::cout, std::cerr);
  if (cmd == "cel") return draguard::cli::Cel(rest, std::cout, std::cerr);
  if (cmd == "topology") return draguard::cli::Topology(rest, std::cout, std::cerr);
  if (cmd == "backstop") return draguard::cli::Backstop(rest, std::cout, std::cerr);
  if (cmd == "uninstall-webhooks") return draguard::cli::UninstallWebhooks(rest, std::cout, std::cerr);
  if (cmd == "selftest") return draguard::cli::Selftest(rest, std::cout, std::cerr);
  std::cerr << "draguard: unknown command \"" << cmd << "\"\n\n" << draguard::cli::UsageText();
  return draguard::cli::kExitUsage;
}
