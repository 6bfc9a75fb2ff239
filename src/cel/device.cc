// Device JSON and its CEL value. See include/draguard/cel/device.h.
#include "draguard/cel/device.h"

#include <nlohmann/json.hpp>

namespace draguard::cel {
namespace {

using nlohmann::json;

// Splits "domain/name" (the domain of a qualified name) or returns {fallback, name}.
std::pair<std::string, std::string> Qualify(const std::string& key, const std::string& fallback) {
  size_t slash = key.find('/');
  if (slash == std::string::npos) return {fallback, key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

Result<AttributeValue> ParseAttribute(const json& v, const std::string& where) {
  if (v.is_boolean()) return AttributeValue(v.get<bool>());
  if (v.is_number_integer()) return AttributeValue(v.get<int64_t>());
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return Status::InvalidArgument(where + ": int out of range");
    return AttributeValue(static_cast<int64_t>(v.get<uint64_t>()));
  }
  if (v.is_string()) return AttributeValue(v.get<std::string>());
  if (!v.is_object() || v.size() != 1) {
    return Status::InvalidArgument(where + ": expected an object with exactly one of int, bool, string, version");
  }
  const std::string k = v.begin().key();
  const json& x = v.begin().value();
  if (k == "int" && (x.is_number_integer() || x.is_number_unsigned())) {
    if (x.is_number_unsigned() && x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Status::InvalidArgument(where + ".int: out of range");
    }
    return AttributeValue(x.get<int64_t>());
  }
  if (k == "bool" && x.is_boolean()) return AttributeValue(x.get<bool>());
  if (k == "string" && x.is_string()) return AttributeValue(x.get<std::string>());
  if (k == "version" && x.is_string()) {
    auto s = Semver::Parse(x.get<std::string>());
    if (!s.ok()) return Status::InvalidArgument(where + ".version: " + s.status().message());
    return AttributeValue(*s);
  }
  return Status::InvalidArgument(where + ": unknown or mistyped attribute value field '" + k + "'");
}

Result<Device> FromJson(const json& j) {
  Device d;
  if (!j.is_object()) return Status::InvalidArgument("device: expected a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (k == "driver") {
      if (!v.is_string()) return Status::InvalidArgument("device.driver: expected a string");
      d.driver = v.get<std::string>();
    } else if (k == "attributes" || k == "capacity") {
      if (!v.is_object()) return Status::InvalidArgument("device." + k + ": expected an object");
    } else if (k == "allowMultipleAllocations") {
      if (!v.is_boolean()) return Status::InvalidArgument("device.allowMultipleAllocations: expected a bool");
      d.allow_multiple_allocations = v.get<bool>();
    } else {
      return Status::InvalidArgument("device: unknown field '" + k + "'");
    }
  }
  if (j.contains("attributes")) {
    for (const auto& [domain, names] : j["attributes"].items()) {
      if (!names.is_object()) return Status::InvalidArgument("device.attributes[" + domain + "]: expected an object");
      d.attributes[domain];  // a domain listed explicitly exists, even when empty
      for (const auto& [name, v] : names.items()) {
        std::string where = "device.attributes[" + domain + "][" + name + "]";
        auto a = ParseAttribute(v, where);
        if (!a.ok()) return a.status();
        auto [dom, id] = Qualify(name, domain);
        d.attributes[dom][id] = *a;
      }
    }
  }
  if (j.contains("capacity")) {
    for (const auto& [domain, names] : j["capacity"].items()) {
      if (!names.is_object()) return Status::InvalidArgument("device.capacity[" + domain + "]: expected an object");
      d.capacity[domain];
      for (const auto& [name, v] : names.items()) {
        std::string where = "device.capacity[" + domain + "][" + name + "]";
        const json* q = &v;
        if (v.is_object() && v.contains("value")) q = &v["value"];
        std::string text;
        if (q->is_string()) text = q->get<std::string>();
        else if (q->is_number_integer()) text = std::to_string(q->get<int64_t>());
        else return Status::InvalidArgument(where + ": expected a quantity string");
        auto parsed = Quantity::Parse(text);
        if (!parsed.ok()) return Status::InvalidArgument(where + ": " + parsed.status().message());
        auto [dom, id] = Qualify(name, domain);
        d.capacity[dom][id] = *parsed;
      }
    }
  }
  return d;
}

}  // namespace

Result<Device> ParseDeviceJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("device: not valid JSON");
  return FromJson(j);
}

Value DeviceToValue(const Device& device) {
  MapValue attrs;
  attrs.missing_is_empty = true;
  for (const auto& [domain, names] : device.attributes) {
    MapValue m;
    for (const auto& [name, v] : names) {
      Value val;
      if (auto* i = std::get_if<int64_t>(&v)) val = Value::Int(*i);
      else if (auto* b = std::get_if<bool>(&v)) val = Value::Bool(*b);
      else if (auto* s = std::get_if<std::string>(&v)) val = Value::String(*s);
      else val = Value::Sem(std::get<Semver>(v));
      m.entries.emplace_back(Value::String(name), std::move(val));
    }
    attrs.entries.emplace_back(Value::String(domain), Value::Map(std::move(m)));
  }
  MapValue caps;
  caps.missing_is_empty = true;
  for (const auto& [domain, names] : device.capacity) {
    MapValue m;
    for (const auto& [name, q] : names) m.entries.emplace_back(Value::String(name), Value::Quant(q));
    caps.entries.emplace_back(Value::String(domain), Value::Map(std::move(m)));
  }
  MapValue dev;
  dev.entries.emplace_back(Value::String("driver"), Value::String(device.driver));
  dev.entries.emplace_back(Value::String("attributes"), Value::Map(std::move(attrs)));
  dev.entries.emplace_back(Value::String("capacity"), Value::Map(std::move(caps)));
  dev.entries.emplace_back(Value::String("allowMultipleAllocations"),
                           Value::Bool(device.allow_multiple_allocations.value_or(false)));
  return Value::Map(std::move(dev));
}

}  // namespace draguard::cel
