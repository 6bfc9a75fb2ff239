#include "draguard/audit/reader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>
#include <vector>

#include "draguard/yamljson/yamljson.h"

namespace draguard::audit {
namespace {

using admission::Json;

constexpr std::size_t kMaxJsonDepth = 128;

bool EndsWithList(const Json& v) {
  if (!v.is_object()) return false;
  auto k = v.find("kind");
  if (k == v.end() || !k->is_string()) return false;
  const std::string& s = k->get_ref<const std::string&>();
  return s.size() >= 4 && s.compare(s.size() - 4, 4, "List") == 0;
}

bool IsBlankOrComment(std::string_view line) {
  auto p = line.find_first_not_of(" \t");
  return p == std::string_view::npos || line[p] == '#';
}

bool IsDash(std::string_view rest) { return !rest.empty() && rest[0] == '-' && (rest.size() == 1 || rest[1] == ' '); }

// A column-0 `items:` key with a block value (nothing but a comment after it).
bool IsItemsKey(std::string_view line) {
  if (line.substr(0, 6) != "items:") return false;
  return IsBlankOrComment(line.substr(6));
}

std::string TooLarge(std::size_t cap) {
  return "document larger than " + std::to_string(cap >> 20) + " MiB";
}

// Splits a YAML stream into documents and the items of block-style Lists, line by line.
class YamlSplitter {
 public:
  YamlSplitter(const std::string& source, const DocumentSink& sink, ReadLimits limits)
      : source_(source), sink_(sink), limits_(limits) {}

  // Returns false when the sink asked to stop.
  bool Line(std::string_view line, std::uint64_t offset) {
    offset_ = offset;
    if (line.substr(0, 3) == "---" && (line.size() == 3 || line[3] == ' ' || line[3] == '\t')) {
      if (!EndDocument()) return false;
      std::string_view rest = line.substr(3);
      if (IsBlankOrComment(rest)) return true;
      return Line(rest.substr(1), offset);
    }
    if (line == "...") return EndDocument();
    if (in_items_) {
      ItemsLine(line);
      return !stopped_;
    }
    if (IsItemsKey(line)) {
      in_items_ = true;
      dash_indent_ = -1;
      items_key_ = std::string(line);
      return true;
    }
    Append(header_, header_large_, line);
    if (!IsBlankOrComment(line)) header_content_ = true;
    return true;
  }

  bool Finish() { return EndDocument(); }

 private:
  void Append(std::string& buf, bool& large, std::string_view line) {
    if (large) return;
    if (buf.size() + line.size() + 1 > limits_.max_document_bytes) {
      large = true;
      buf.clear();
      buf.shrink_to_fit();
      return;
    }
    buf.append(line);
    buf.push_back('\n');
  }

  // One line inside `items:`; a line that ends the items goes to the header.
  void ItemsLine(std::string_view line) {
    if (IsBlankOrComment(line)) {
      if (have_item_) Append(item_, item_large_, line);
      return;
    }
    const std::size_t n = line.find_first_not_of(' ');
    std::string_view rest = line.substr(n);
    if (dash_indent_ < 0) {
      if (IsDash(rest)) {
        dash_indent_ = static_cast<int>(n);
        listed_ = true;
        StartItem(line, n);
        return;
      }
      // Not a block sequence after all: the key belongs to the document.
      in_items_ = false;
      Append(header_, header_large_, items_key_);
      header_content_ = true;
      Append(header_, header_large_, line);
      return;
    }
    if (static_cast<int>(n) == dash_indent_ && IsDash(rest)) {
      if (!EmitItem()) stopped_ = true;
      StartItem(line, n);
      return;
    }
    if (static_cast<int>(n) > dash_indent_) {
      Append(item_, item_large_, line);
      return;
    }
    if (!EmitItem()) stopped_ = true;
    in_items_ = false;
    Append(header_, header_large_, line);
    return;
  }

  void StartItem(std::string_view line, std::size_t dash) {
    item_.clear();
    item_large_ = false;
    have_item_ = true;
    std::string l(line);
    l[dash] = ' ';  // "- key: v" → "  key: v": the item becomes an indented mapping
    Append(item_, item_large_, l);
  }

  Document Make() {
    Document d;
    d.source = source_;
    d.index = index_;
    d.offset = offset_;
    return d;
  }

  bool EmitItem() {
    if (!have_item_) return true;
    have_item_ = false;
    Document d = Make();
    d.item = item_index_++;
    if (item_large_) {
      d.error = TooLarge(limits_.max_document_bytes);
    } else {
      auto docs = yamljson::ParseDocuments(item_);
      if (!docs.ok()) {
        d.error = docs.status().message();
      } else if (docs->empty()) {
        d.error = "empty list item";
      } else {
        d.object = std::move(docs->front());
      }
    }
    item_.clear();
    return sink_(std::move(d));
  }

  bool EndDocument() {
    bool go = !stopped_;
    if (in_items_) {
      if (go) go = EmitItem();
      in_items_ = false;
    }
    if (go && !listed_ && (header_content_ || header_large_)) {
      Document d = Make();
      if (header_large_) {
        d.error = TooLarge(limits_.max_document_bytes);
        go = sink_(std::move(d));
      } else if (auto docs = yamljson::ParseDocuments(header_); !docs.ok()) {
        d.error = docs.status().message();
        go = sink_(std::move(d));
      } else if (!docs->empty()) {
        Json& v = docs->front();
        auto items = v.is_object() ? v.find("items") : v.end();
        if (EndsWithList(v) && items != v.end() && items->is_array()) {
          // A List written in flow style: still one item at a time for the sink.
          std::size_t k = 0;
          for (auto& item : *items) {
            Document di = Make();
            di.item = k++;
            di.object = std::move(item);
            if (!(go = sink_(std::move(di)))) break;
          }
        } else {
          d.object = std::move(v);
          go = sink_(std::move(d));
        }
      } else {
        --index_;  // only comments: not a document
      }
      ++index_;
    } else if (listed_ || header_content_) {
      ++index_;
    }
    header_.clear();
    header_large_ = header_content_ = listed_ = false;
    item_index_ = 0;
    if (!go) stopped_ = true;
    return go;
  }

  const std::string& source_;
  const DocumentSink& sink_;
  ReadLimits limits_;
  std::uint64_t offset_ = 0;
  std::size_t index_ = 0, item_index_ = 0;
  std::string header_, item_, items_key_;
  bool header_large_ = false, header_content_ = false, item_large_ = false;
  bool in_items_ = false, have_item_ = false, listed_ = false, stopped_ = false;
  int dash_indent_ = -1;
};

// Builds one JSON value from SAX events, with a size estimate for the cap.
class Builder {
 public:
  template <class V>
  void Value(V&& v) {
    Json* slot = Slot();
    *slot = Json(std::forward<V>(v));
  }
  void Start(Json container) {
    Json* slot = Slot();
    *slot = std::move(container);
    stack_.push_back(slot);
  }
  void Key(std::string& k) {
    bytes_ += k.size() + 16;
    key_ = &(*stack_.back())[std::move(k)];
  }
  void End() { stack_.pop_back(); }
  bool Done() const { return started_ && stack_.empty(); }
  Json Take() {
    Json v = std::move(root_);
    root_ = Json();
    started_ = false;
    bytes_ = 0;
    stack_.clear();
    return v;
  }
  std::size_t& bytes() { return bytes_; }

 private:
  Json* Slot() {
    bytes_ += 16;
    if (stack_.empty()) {
      started_ = true;
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(Json());
      return &top.back();
    }
    return key_;
  }

  Json root_;
  std::vector<Json*> stack_;
  Json* key_ = nullptr;
  bool started_ = false;
  std::size_t bytes_ = 0;
};

// SAX handler for one top-level JSON value: builds it, except the elements of a top-level array
// or of a top-level object's "items" array, which go to the sink one at a time.
class JsonStreamer {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  JsonStreamer(const std::string& source, std::size_t index, const DocumentSink& sink, ReadLimits limits,
               std::istream& in)
      : source_(source), index_(index), sink_(sink), limits_(limits), in_(in) {}

  bool null() { return Scalar(nullptr); }
  bool boolean(bool v) { return Scalar(v); }
  bool number_integer(number_integer_t v) { return Scalar(v); }
  bool number_unsigned(number_unsigned_t v) { return Scalar(v); }
  bool number_float(number_float_t v, const string_t&) { return Scalar(v); }
  bool string(string_t& v) {
    Target().bytes() += v.size();
    return Scalar(std::move(v));
  }
  bool binary(binary_t&) { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t) {
    if (!Flush()) return false;
    if (depth_ == 0) top_object_ = true;
    return Open(Json::object());
  }
  bool start_array(std::size_t) {
    if (pending_items_ && depth_ == 1) {
      pending_items_ = false;
      return OpenItems(2);
    }
    if (!Flush()) return false;
    if (depth_ == 0) return OpenItems(1);
    return Open(Json::array());
  }
  bool key(string_t& k) {
    if (InItems() && depth_ > items_depth_) {
      item_.Key(k);
      return Check();
    }
    if (!Flush()) return false;
    if (depth_ == 1 && top_object_ && k == "items") {
      pending_items_ = true;
      return true;
    }
    header_.Key(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool end_array() {
    if (items_ && depth_ == items_depth_) {
      items_ = false;
      --depth_;
      return depth_ == 0 ? DocDone() : true;
    }
    return Close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    error_ = ex.what();
    return false;
  }

  bool listed() const { return listed_; }
  const std::string& error() const { return error_; }
  std::size_t items_seen() const { return item_index_; }
  bool stopped() const { return stopped_; }

 private:
  bool InItems() const { return items_ && depth_ >= items_depth_; }
  Builder& Target() { return InItems() ? item_ : header_; }

  // A deferred "items" key whose value turned out not to be an array belongs to the header.
  bool Flush() {
    if (pending_items_) {
      pending_items_ = false;
      std::string k = "items";
      header_.Key(k);
    }
    return true;
  }
  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }
  bool Check() {
    if (Target().bytes() > limits_.max_document_bytes) return Fail(TooLarge(limits_.max_document_bytes));
    return true;
  }
  template <class V>
  bool Scalar(V&& v) {
    if (InItems()) {
      item_.Value(std::forward<V>(v));
      return Check() && ItemDone();
    }
    Flush();
    header_.Value(std::forward<V>(v));
    if (!Check()) return false;
    return depth_ == 0 ? DocDone() : true;
  }
  bool Open(Json container) {
    if (++depth_ > kMaxJsonDepth) return Fail("nesting deeper than " + std::to_string(kMaxJsonDepth));
    Target().Start(std::move(container));
    return Check();
  }
  bool OpenItems(std::size_t depth) {
    ++depth_;
    items_ = true;
    listed_ = true;
    items_depth_ = depth;
    return true;
  }
  bool Close() {
    const bool item = InItems();
    (item ? item_ : header_).End();
    --depth_;
    if (item) return ItemDone();
    return depth_ == 0 ? DocDone() : true;
  }
  Document Make() {
    Document d;
    d.source = source_;
    d.index = index_;
    auto pos = in_.tellg();
    d.offset = pos < 0 ? 0 : static_cast<std::uint64_t>(pos);
    return d;
  }
  bool ItemDone() {
    if (!item_.Done()) return true;
    Document d = Make();
    d.item = item_index_++;
    d.object = item_.Take();
    if (!sink_(std::move(d))) {
      stopped_ = true;
      return false;
    }
    return true;
  }
  bool DocDone() {
    if (listed_) return true;  // the List's own fields are not a document
    Document d = Make();
    d.object = header_.Take();
    if (!sink_(std::move(d))) {
      stopped_ = true;
      return false;
    }
    return true;
  }

  const std::string& source_;
  std::size_t index_;
  const DocumentSink& sink_;
  ReadLimits limits_;
  std::istream& in_;
  Builder header_, item_;
  std::size_t depth_ = 0, items_depth_ = 0, item_index_ = 0;
  bool top_object_ = false, pending_items_ = false, items_ = false, listed_ = false, stopped_ = false;
  std::string error_;
};

void ReadJson(std::istream& in, const std::string& source, const DocumentSink& sink, ReadLimits limits) {
  for (std::size_t index = 0;; ++index) {
    int c;
    while ((c = in.peek()) != std::char_traits<char>::eof() && std::isspace(c)) in.get();
    if (c == std::char_traits<char>::eof()) return;
    JsonStreamer h(source, index, sink, limits, in);
    bool ok = false;
    try {
      ok = Json::sax_parse(in, &h, Json::input_format_t::json, /*strict=*/false);
    } catch (const std::exception& e) {
      ok = false;
    }
    if (h.stopped()) return;
    if (!ok) {
      Document d;
      d.source = source;
      d.index = index;
      if (h.listed()) d.item = h.items_seen();
      d.error = h.error().empty() ? "invalid JSON" : h.error();
      sink(std::move(d));
      return;  // a JSON syntax error leaves no safe place to resume
    }
  }
}

}  // namespace

std::string Document::Where() const {
  std::string s = source + ": document " + std::to_string(index);
  if (item) s += " item " + std::to_string(*item);
  return s;
}

void ReadStream(std::istream& in, const std::string& source, const DocumentSink& sink, ReadLimits limits) {
  // Skip a UTF-8 byte order mark and leading blanks to tell JSON from YAML.
  if (in.peek() == 0xEF) {
    char bom[3];
    in.read(bom, 3);
  }
  int c;
  std::uint64_t offset = 0;
  std::string pending;
  while ((c = in.peek()) != std::char_traits<char>::eof() && (c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
    pending.push_back(static_cast<char>(in.get()));
  }
  if (c == '{' || c == '[') {
    ReadJson(in, source, sink, limits);
    return;
  }
  YamlSplitter splitter(source, sink, limits);
  std::string line;
  offset = pending.size();
  while (std::getline(in, line)) {
    offset += line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!splitter.Line(line, offset)) return;
  }
  splitter.Finish();
}

Status ReadPath(const std::string& path, const DocumentSink& sink, ReadLimits limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      std::string ext = it->path().extension().string();
      if (ext == ".yaml" || ext == ".yml" || ext == ".json") files.push_back(it->path().string());
    }
    if (ec) return Status::InvalidArgument(path + ": " + ec.message());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else if (fs::exists(path, ec)) {
    return Status::InvalidArgument(path + ": not a regular file or directory");
  } else {
    return Status::NotFound(path + ": no such file or directory");
  }
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return Status::InvalidArgument(file + ": cannot be opened");
    bool go = true;
    ReadStream(in, file, [&](Document&& d) { return go = sink(std::move(d)); }, limits);
    if (!go) break;
  }
  return Status::Ok();
}

}  // namespace draguard::audit
