// Kubernetes resource.Quantity (the type of `quantity()` in CEL), with the exact semantics of
// k8s.io/apimachinery/pkg/api/resource: the same parser (suffixes n u m "" k M G T P E,
// Ki Mi Gi Ti Pi Ei, exponents e/E), the same rounding (values below 1n round away from zero to
// 1n; values that need more than nano precision are rounded up) and capping (2^63-1 on the slow
// path), exact comparison and the same canonical String() form.
//
// Values are exact decimals: an unsigned 128-bit magnitude times a power of ten. Value type;
// thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "draguard/status.h"

namespace draguard::k8s {

/// A Kubernetes resource quantity.
class Quantity {
 public:
  /// How a quantity was written; decides its canonical form.
  enum class Format : uint8_t { kDecimalSI, kBinarySI, kDecimalExponent };

  /// Zero, DecimalSI.
  Quantity() = default;

  /// Parses like resource.ParseQuantity. Errors carry Kubernetes' messages.
  static Result<Quantity> Parse(std::string_view s);
  /// mantissa * 10^exponent in the given format, without rounding (like the test helpers of
  /// quantity_test.go or resource.NewScaledQuantity).
  static Quantity FromDecimal(int64_t mantissa, int32_t exponent, Format format);
  /// resource.NewQuantity(v, DecimalSI).
  static Quantity FromInt64(int64_t v);

  /// -1, 0 or 1 like Quantity.Cmp (exact).
  int Compare(const Quantity& other) const;
  /// Canonical string like Quantity.String() ("80Gi", "1500m", "1e3", ...).
  std::string ToString() const;
  /// Exact sum like Quantity.Add; fails only if the result does not fit 128 bits of magnitude.
  Result<Quantity> Add(const Quantity& other) const;
  /// Exact difference like Quantity.Sub.
  Result<Quantity> Sub(const Quantity& other) const;
  /// The value as int64 when it is an integer within range (Quantity.AsInt64).
  std::optional<int64_t> AsInt64() const;
  /// Nearest double (Quantity.AsApproximateFloat64).
  double AsApproximateFloat() const;
  /// -1, 0 or 1.
  int Sign() const { return mag_ == 0 ? 0 : (neg_ ? -1 : 1); }
  /// The format the canonical form is based on.
  Format format() const { return format_; }

 private:
  Quantity(bool neg, unsigned __int128 mag, int64_t exp, Format f);
  void Normalize();

  bool neg_ = false;
  unsigned __int128 mag_ = 0;  // value = (neg_ ? -1 : 1) * mag_ * 10^exp_, mag_ without trailing zeros
  int64_t exp_ = 0;
  Format format_ = Format::kDecimalSI;
};

}  // namespace draguard::k8s
