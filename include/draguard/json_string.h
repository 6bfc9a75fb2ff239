// JSON string literals written directly, byte-for-byte as nlohmann_json's dump writes them.
#pragma once

#include <string>
#include <string_view>

namespace draguard {

/// Appends `s` as a quoted JSON string exactly as nlohmann_json's `dump(-1, ' ', false,
/// error_handler_t::replace)` writes it: UTF-8 kept, control characters escaped, invalid UTF-8
/// replaced by U+FFFD. Valid UTF-8 (the common case) is escaped here without a document.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace draguard
