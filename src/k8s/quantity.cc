// Kubernetes resource.Quantity. See include/draguard/cel/quantity.h. The algorithm follows
// k8s.io/apimachinery/pkg/api/resource/quantity.go (ParseQuantity, parseQuantityString,
// CanonicalizeBytes) and suffix.go step by step; comments name the Go code they mirror.
#include "draguard/k8s/quantity.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace draguard::k8s {
namespace {

using U128 = unsigned __int128;

constexpr const char* kErrFormatWrong =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr const char* kErrNumeric = "unable to parse quantity's numeric portion";
constexpr const char* kErrSuffix = "unable to parse quantity's suffix";

std::string U128ToString(U128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(s.begin(), s.end());
  return s;
}

bool MulOverflow(U128 a, U128 b, U128* out) {
  if (a != 0 && b > (~U128(0)) / a) return true;
  *out = a * b;
  return false;
}

// 10^n, or false if it does not fit.
bool Pow10(int64_t n, U128* out) {
  if (n < 0 || n > 38) return false;
  U128 v = 1;
  for (int64_t i = 0; i < n; ++i) v *= 10;
  *out = v;
  return true;
}

struct ParsedString {
  bool positive = true;
  std::string_view value, num, denom, suffix;  // views into the input
};

// parseQuantityString.
bool ParseQuantityString(std::string_view str, ParsedString& p) {
  size_t pos = 0, end = str.size();
  if (pos < end) {
    if (str[0] == '-') {
      p.positive = false;
      ++pos;
    } else if (str[0] == '+') {
      ++pos;
    }
  }
  // strip leading zeros
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      p.num = "0";
      p.value = "0";
      return true;
    }
    if (str[i] == '0') ++pos;
    else break;
  }
  // numerator
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      p.num = str.substr(pos, end - pos);
      p.value = str.substr(0, end);
      if (p.num.empty()) p.num = "0";
      return true;
    }
    if (!(str[i] >= '0' && str[i] <= '9')) {
      p.num = str.substr(pos, i - pos);
      pos = i;
      break;
    }
  }
  if (p.num.empty()) p.num = "0";
  if (pos < end && str[pos] == '.') {
    ++pos;
    for (size_t i = pos;; ++i) {
      if (i >= end) {
        p.denom = str.substr(pos, end - pos);
        p.value = str.substr(0, end);
        return true;
      }
      if (!(str[i] >= '0' && str[i] <= '9')) {
        p.denom = str.substr(pos, i - pos);
        pos = i;
        break;
      }
    }
  }
  p.value = str.substr(0, pos);
  size_t suffix_start = pos;
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      p.suffix = str.substr(suffix_start);
      return true;
    }
    if (std::string_view("eEinumkKMGTP").find(str[i]) == std::string_view::npos) {
      pos = i;
      break;
    }
  }
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      p.suffix = str.substr(suffix_start);
      return true;
    }
    if (!(str[i] >= '0' && str[i] <= '9')) break;
  }
  return false;  // ErrFormatWrong
}

// quantitySuffixer.interpret.
bool InterpretSuffix(std::string_view s, int& base, int64_t& exponent, Quantity::Format& format) {
  static constexpr struct {
    const char* s;
    int base;
    int exp;
    bool binary;
  } kTable[] = {{"", 10, 0, false},  {"n", 10, -9, false}, {"u", 10, -6, false}, {"m", 10, -3, false},
                {"k", 10, 3, false}, {"M", 10, 6, false},  {"G", 10, 9, false},  {"T", 10, 12, false},
                {"P", 10, 15, false}, {"E", 10, 18, false}, {"Ki", 2, 10, true},  {"Mi", 2, 20, true},
                {"Gi", 2, 30, true}, {"Ti", 2, 40, true},  {"Pi", 2, 50, true},  {"Ei", 2, 60, true}};
  for (const auto& e : kTable) {
    if (s == e.s) {
      base = e.base;
      exponent = e.exp;
      format = e.binary ? Quantity::Format::kBinarySI : Quantity::Format::kDecimalSI;
      return true;
    }
  }
  if (s.size() > 1 && (s[0] == 'e' || s[0] == 'E')) {
    // strconv.ParseInt(s[1:], 10, 64) then int32(...)
    std::string_view d = s;
    d.remove_prefix(1);
    size_t i = 0;
    bool neg = false;
    if (!d.empty() && (d[0] == '+' || d[0] == '-')) {
      neg = d[0] == '-';
      i = 1;
    }
    if (i >= d.size()) return false;
    int64_t v = 0;
    for (; i < d.size(); ++i) {
      if (d[i] < '0' || d[i] > '9') return false;
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (d[i] - '0');
    }
    // Exponents outside [-MaxInt32, MaxInt32] are rejected, not truncated
    // (quantity_test.go TestInterpretExponentInt32Bounds).
    if (v > INT32_MAX) return false;
    base = 10;
    exponent = neg ? -v : v;
    format = Quantity::Format::kDecimalExponent;
    return true;
  }
  return false;
}

// Multiplies a decimal digit string by 2.
void DoubleDigits(std::string& d) {
  int carry = 0;
  for (size_t i = d.size(); i-- > 0;) {
    int v = (d[i] - '0') * 2 + carry;
    d[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  if (carry) d.insert(d.begin(), static_cast<char>('0' + carry));
}

}  // namespace

Quantity::Quantity(bool neg, U128 mag, int64_t exp, Format f) : neg_(neg), mag_(mag), exp_(exp), format_(f) {
  Normalize();
}

void Quantity::Normalize() {
  if (mag_ == 0) {
    neg_ = false;
    exp_ = 0;
    return;
  }
  while (mag_ % 10 == 0) {
    mag_ /= 10;
    ++exp_;
  }
}

Quantity Quantity::FromDecimal(int64_t mantissa, int32_t exponent, Format format) {
  bool neg = mantissa < 0;
  U128 mag = neg ? static_cast<U128>(-static_cast<__int128>(mantissa)) : static_cast<U128>(mantissa);
  return Quantity(neg, mag, exponent, format);
}

Quantity Quantity::FromInt64(int64_t v) {
  bool neg = v < 0;
  U128 mag = neg ? U128(0) - U128(static_cast<__int128>(v)) : U128(v);
  if (neg) mag = static_cast<U128>(-static_cast<__int128>(v));
  return Quantity(neg, mag, 0, Format::kDecimalSI);
}

Result<Quantity> Quantity::Parse(std::string_view str) {
  if (str.empty()) return Status::InvalidArgument(kErrFormatWrong);
  if (str == "0") return Quantity();
  ParsedString p;
  if (!ParseQuantityString(str, p)) return Status::InvalidArgument(kErrFormatWrong);
  int base = 10;
  int64_t exponent = 0;
  Format format = Format::kDecimalSI;
  if (!InterpretSuffix(p.suffix, base, exponent, format)) return Status::InvalidArgument(kErrSuffix);

  // Fast path: int64Amount without rounding or capping.
  int64_t precision = 0, scale = 0;
  int64_t mantissa_shift = 0;
  if (format == Format::kDecimalExponent || format == Format::kDecimalSI) {
    scale = exponent;
    precision = 18 - static_cast<int64_t>(p.num.size() + p.denom.size());
  } else {
    scale = 0;
    if (exponent >= 0 && p.denom.empty()) {
      mantissa_shift = exponent;
      precision = 15 - static_cast<int64_t>(p.num.size()) -
                  static_cast<int64_t>(static_cast<float>(exponent) * 3 / 10) - 1;
    } else {
      precision = -1;
    }
  }
  if (precision >= 0) {
    scale -= static_cast<int64_t>(p.denom.size());
    if (scale >= -9) {
      // strconv.ParseInt(num + denom, 10, 64): at most 18 digits here, so it fits.
      int64_t value = 0;
      for (char c : p.num) value = value * 10 + (c - '0');
      for (char c : p.denom) value = value * 10 + (c - '0');
      // int64Multiply(value, 1 << shift)
      __int128 r = static_cast<__int128>(value) * (static_cast<__int128>(1) << mantissa_shift);
      if (r <= INT64_MAX) {
        return Quantity(!p.positive, static_cast<U128>(r), scale, format);
      }
    }
  }

  // Slow path: inf.Dec from the value text, suffix applied, rounded up to nano, capped.
  // value = digits * 10^e10 (* 2^exponent for binary suffixes).
  std::string digits;
  int64_t e10 = 0;
  {
    std::string_view v(p.value);
    if (!v.empty() && (v[0] == '+' || v[0] == '-')) v.remove_prefix(1);
    bool seen_dot = false;
    bool any = false;
    for (char c : v) {
      if (c == '.') {
        if (seen_dot) return Status::InvalidArgument(kErrNumeric);
        seen_dot = true;
        continue;
      }
      if (c < '0' || c > '9') return Status::InvalidArgument(kErrNumeric);
      any = true;
      digits.push_back(c);
      if (seen_dot) --e10;
    }
    if (!any) return Status::InvalidArgument(kErrNumeric);
  }
  if (base == 10) {
    e10 += exponent;
  } else {
    for (int64_t i = 0; i < exponent; ++i) DoubleDigits(digits);
  }
  size_t nz = digits.find_first_not_of('0');
  digits = nz == std::string::npos ? "" : digits.substr(nz);
  if (digits.empty()) return Quantity(false, 0, 0, format);
  // Integer digits of |value|: digits.size() + e10. The cap is 2^63-1 = 9223372036854775807.
  constexpr const char* kMax = "9223372036854775807";
  int64_t int_digits = static_cast<int64_t>(digits.size()) + e10;
  bool capped = false;
  if (int_digits > 19) {
    capped = true;
  } else if (int_digits == 19) {
    std::string ip = digits.substr(0, 19);
    while (ip.size() < 19) ip.push_back('0');
    int c = ip.compare(kMax);
    if (c > 0) {
      capped = true;
    } else if (c == 0) {
      // Anything after the integer part makes it bigger than the cap.
      capped = digits.size() > 19 && digits.find_first_not_of('0', 19) != std::string::npos;
    }
  }
  Format out_format = format;
  if (capped) {
    U128 m = 9223372036854775807ULL;
    return Quantity(!p.positive, m, 0, out_format);
  }
  // Round up (away from zero) to 9 fractional digits: nanos = ceil(|value| * 1e9).
  int64_t keep = static_cast<int64_t>(digits.size()) + e10 + 9;  // digits at or above 1e-9
  U128 nanos = 0;
  bool remainder = false;
  if (keep <= 0) {
    remainder = true;
  } else {
    for (int64_t i = 0; i < keep; ++i) {
      int d = i < static_cast<int64_t>(digits.size()) ? digits[static_cast<size_t>(i)] - '0' : 0;
      nanos = nanos * 10 + static_cast<unsigned>(d);
    }
    if (keep < static_cast<int64_t>(digits.size())) {
      remainder = digits.find_first_not_of('0', static_cast<size_t>(keep)) != std::string::npos;
    }
  }
  if (remainder) nanos += 1;
  if (format == Format::kBinarySI && nanos < 1000000000) out_format = Format::kDecimalSI;
  return Quantity(!p.positive, nanos, -9, out_format);
}

int Quantity::Compare(const Quantity& o) const {
  int sa = Sign(), sb = o.Sign();
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  // Compare magnitudes: scale the one with the larger exponent down to the other's exponent;
  // if that overflows 128 bits it is the larger one.
  int mag_cmp;
  {
    const Quantity& hi = exp_ >= o.exp_ ? *this : o;
    const Quantity& lo = exp_ >= o.exp_ ? o : *this;
    U128 p, scaled;
    if (Pow10(hi.exp_ - lo.exp_, &p) && !MulOverflow(hi.mag_, p, &scaled)) {
      int c = scaled < lo.mag_ ? -1 : scaled > lo.mag_ ? 1 : 0;
      mag_cmp = exp_ >= o.exp_ ? c : -c;
      return neg_ ? -mag_cmp : mag_cmp;
    }
    if (hi.exp_ - lo.exp_ <= 38) {
      mag_cmp = exp_ >= o.exp_ ? 1 : -1;  // hi overflowed, so it exceeds any 128-bit magnitude
      return neg_ ? -mag_cmp : mag_cmp;
    }
  }
  std::string da = U128ToString(mag_), db = U128ToString(o.mag_);
  int64_t la = static_cast<int64_t>(da.size()) + exp_, lb = static_cast<int64_t>(db.size()) + o.exp_;
  if (la != lb) {
    mag_cmp = la < lb ? -1 : 1;
  } else {
    size_t n = std::max(da.size(), db.size());
    da.resize(n, '0');
    db.resize(n, '0');
    int c = da.compare(db);
    mag_cmp = c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  return neg_ ? -mag_cmp : mag_cmp;
}

Result<Quantity> Quantity::Add(const Quantity& o) const {
  Format f = Sign() == 0 ? o.format_ : format_;
  if (o.mag_ == 0) return Quantity(neg_, mag_, exp_, f);
  if (mag_ == 0) return Quantity(o.neg_, o.mag_, o.exp_, f);
  int64_t e = std::min(exp_, o.exp_);
  U128 pa, pb, a, b;
  if (!Pow10(exp_ - e, &pa) || !Pow10(o.exp_ - e, &pb) || MulOverflow(mag_, pa, &a) || MulOverflow(o.mag_, pb, &b)) {
    return Status::ResourceExhausted("quantity arithmetic overflow");
  }
  if (neg_ == o.neg_) {
    if (a > ~U128(0) - b) return Status::ResourceExhausted("quantity arithmetic overflow");
    return Quantity(neg_, a + b, e, f);
  }
  if (a >= b) return Quantity(neg_, a - b, e, f);
  return Quantity(o.neg_, b - a, e, f);
}

Result<Quantity> Quantity::Sub(const Quantity& o) const {
  Quantity neg = o;
  if (neg.mag_ != 0) neg.neg_ = !neg.neg_;
  return Add(neg);
}

std::optional<int64_t> Quantity::AsInt64() const {
  if (mag_ == 0) return 0;
  if (exp_ < 0) return std::nullopt;
  U128 p, v;
  if (!Pow10(exp_, &p) || MulOverflow(mag_, p, &v)) return std::nullopt;
  if (!neg_ && v > static_cast<U128>(INT64_MAX)) return std::nullopt;
  if (neg_ && v > static_cast<U128>(INT64_MAX) + 1) return std::nullopt;
  return neg_ ? static_cast<int64_t>(U128(0) - v) : static_cast<int64_t>(v);
}

double Quantity::AsApproximateFloat() const {
  double m = static_cast<double>(mag_);
  double v = m * std::pow(10.0, static_cast<double>(exp_));
  return neg_ ? -v : v;
}

std::string Quantity::ToString() const {
  if (mag_ == 0) return "0";
  std::string sign = neg_ ? "-" : "";
  Format f = format_;
  if (f == Format::kBinarySI) {
    // CanonicalizeBytes: small or fractional binary values are shown as DecimalSI.
    Quantity lo = FromInt64(-1024), hi = FromInt64(1024);
    if (Compare(lo) > 0 && Compare(hi) < 0) {
      f = Format::kDecimalSI;
    } else if (exp_ < 0) {
      f = Format::kDecimalSI;
    } else {
      U128 p, v;
      if (!Pow10(exp_, &p) || MulOverflow(mag_, p, &v)) {
        f = Format::kDecimalSI;
      } else {
        int times = 0;
        while (v >= 1024 && v % 1024 == 0) {
          v /= 1024;
          ++times;
        }
        static constexpr const char* kBin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
        if (times <= 6) return sign + U128ToString(v) + kBin[times];
        f = Format::kDecimalSI;
      }
    }
  }
  // AsCanonicalBytes: exponent made a multiple of 3.
  std::string digits = U128ToString(mag_);
  int64_t e = exp_;
  while (e % 3 != 0) {
    digits.push_back('0');
    --e;
  }
  if (f == Format::kDecimalExponent) {
    return sign + digits + (e == 0 ? "" : "e" + std::to_string(e));
  }
  static constexpr struct {
    int e;
    const char* s;
  } kDec[] = {{-9, "n"}, {-6, "u"}, {-3, "m"}, {0, ""}, {3, "k"}, {6, "M"}, {9, "G"}, {12, "T"}, {15, "P"}, {18, "E"}};
  for (const auto& d : kDec) {
    if (d.e == e) return sign + digits + d.s;
  }
  // Outside the SI table (only reachable through exponent notation): use an exponent.
  return sign + digits + "e" + std::to_string(e);
}

}  // namespace draguard::k8s
