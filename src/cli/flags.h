// A minimal flag parser for the CLI: "--name value", "--name=value", boolean "--name".
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace draguard::cli {

/// Parsed flags and positional arguments.
struct Flags {
  std::map<std::string, std::vector<std::string>> values;  ///< flag → every value given
  std::vector<std::string> positional;
  std::string error;                                       ///< non-empty on a usage error

  /// Last value of `name`, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() || it->second.empty() ? fallback : it->second.back();
  }
  /// True when `name` was given.
  bool Has(const std::string& name) const { return values.count(name) != 0; }
};

/// Parses `args`. `with_value` lists flags that take a value, `boolean` those that do not;
/// anything else starting with "-" (except "-" itself) is an error.
inline Flags ParseFlags(const std::vector<std::string>& args, const std::set<std::string>& with_value,
                        const std::set<std::string>& boolean) {
  Flags f;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') {
      f.positional.push_back(a);
      continue;
    }
    std::string name = a, value;
    bool has_inline = false;
    if (auto eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_inline = true;
    }
    if (boolean.count(name) != 0 && !has_inline) {
      f.values[name].push_back("true");
    } else if (with_value.count(name) != 0) {
      if (!has_inline) {
        if (i + 1 >= args.size()) {
          f.error = "flag " + name + " needs a value";
          return f;
        }
        value = args[++i];
      }
      f.values[name].push_back(value);
    } else {
      f.error = "unknown flag " + name;
      return f;
    }
  }
  return f;
}

}  // namespace draguard::cli
