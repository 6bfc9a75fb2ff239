// A DRA device as CEL selectors see it: driver, attributes by domain, capacity by domain.
//
// JSON form (the CLI's --device): {"driver": "gpu.nvidia.com",
//   "attributes": {"gpu.nvidia.com": {"type": {"string": "gpu"}, "index": {"int": 0},
//                                     "driverVersion": {"version": "550.54.15"}}},
//   "capacity": {"gpu.nvidia.com": {"memory": "80Gi"}},
//   "allowMultipleAllocations": false}
// Attribute values are objects with exactly one of int / bool / string / version (as in the
// ResourceSlice API); bare JSON numbers, booleans and strings are accepted as shorthands.
// Capacity values are quantity strings or {"value": "80Gi"}. An attribute or capacity name of the
// form "domain/name" is placed under that domain, an unqualified one under its map's domain.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "draguard/k8s/quantity.h"
#include "draguard/cel/semver.h"
#include "draguard/cel/value.h"
#include "draguard/status.h"

namespace draguard::cel {

/// One attribute value: int, bool, string or version.
using AttributeValue = std::variant<int64_t, bool, std::string, Semver>;

/// A device's data as visible to CEL.
struct Device {
  std::string driver;                                                    ///< device.driver
  std::map<std::string, std::map<std::string, AttributeValue>> attributes;  ///< domain -> name -> value
  std::map<std::string, std::map<std::string, Quantity>> capacity;         ///< domain -> name -> quantity
  std::optional<bool> allow_multiple_allocations;                        ///< only with the gate
};

/// Parses the JSON form above. Errors name the offending field.
Result<Device> ParseDeviceJson(std::string_view json);

/// The CEL value of `device` (a map with missing-domain-is-empty semantics for attributes/capacity).
Value DeviceToValue(const Device& device);

}  // namespace draguard::cel
