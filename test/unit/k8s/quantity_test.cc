// Quantity vectors.
//
// The Quantity tables are taken from Kubernetes' own tests:
//   kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/api/resource/quantity_test.go
//   (master, commit 002cd1a0cd960ebe9d6f194d342384d6fe0fedcf): TestQuantityParse (value and
//   format, plus the negated and '+'-prefixed variants and the invalid inputs),
//   TestInterpretExponentInt32Bounds, TestQuantityCmp, TestQuantityString (canonical form and the
//   alternates that must canonicalise to it), TestQuantityParseEmit, TestBinarySIZeroExponentString,
//   TestQuantityAddZeroPreservesSuffix / SubZeroPreservesSuffix.
// decQuantity(m, e, f) there is Quantity::FromDecimal(m, e, f) here.
#include "draguard/k8s/quantity.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace draguard::k8s {
namespace {

using F = Quantity::Format;

Quantity Dec(int64_t m, int32_t e, F f) { return Quantity::FromDecimal(m, e, f); }
Quantity Max(F f) { return Quantity::FromDecimal(9223372036854775807LL, 0, f); }

struct ParseCase {
  const char* in;
  Quantity want;
  F format;
};

// TestQuantityParse table.
std::vector<ParseCase> ParseTable() {
  return {
      {"0", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"0n", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"0u", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"0m", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"0Ki", Dec(0, 0, F::kBinarySI), F::kBinarySI},
      {"0k", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"0Mi", Dec(0, 0, F::kBinarySI), F::kBinarySI},
      {"0M", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"0Gi", Dec(0, 0, F::kBinarySI), F::kBinarySI},
      {"0G", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"0Ti", Dec(0, 0, F::kBinarySI), F::kBinarySI},
      {"0T", Dec(0, 0, F::kDecimalSI), F::kDecimalSI},
      {"1", Dec(1, 0, F::kDecimalSI), F::kDecimalSI},
      {"1Ki", Dec(1024, 0, F::kBinarySI), F::kBinarySI},
      {"8Ki", Dec(8 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"7Mi", Dec(7LL * 1024 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"6Gi", Dec(6LL * 1024 * 1024 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"5Ti", Dec(5LL * 1024 * 1024 * 1024 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"4Pi", Dec(4LL * 1024 * 1024 * 1024 * 1024 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"3Ei", Dec(3LL * 1024 * 1024 * 1024 * 1024 * 1024 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"10Ti", Dec(10LL * 1024 * 1024 * 1024 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"100Ti", Dec(100LL * 1024 * 1024 * 1024 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"5n", Dec(5, -9, F::kDecimalSI), F::kDecimalSI},
      {"4u", Dec(4, -6, F::kDecimalSI), F::kDecimalSI},
      {"3m", Dec(3, -3, F::kDecimalSI), F::kDecimalSI},
      {"9", Dec(9, 0, F::kDecimalSI), F::kDecimalSI},
      {"8k", Dec(8, 3, F::kDecimalSI), F::kDecimalSI},
      {"50k", Dec(5, 4, F::kDecimalSI), F::kDecimalSI},
      {"7M", Dec(7, 6, F::kDecimalSI), F::kDecimalSI},
      {"6G", Dec(6, 9, F::kDecimalSI), F::kDecimalSI},
      {"5T", Dec(5, 12, F::kDecimalSI), F::kDecimalSI},
      {"40T", Dec(4, 13, F::kDecimalSI), F::kDecimalSI},
      {"300T", Dec(3, 14, F::kDecimalSI), F::kDecimalSI},
      {"2P", Dec(2, 15, F::kDecimalSI), F::kDecimalSI},
      {"1E", Dec(1, 18, F::kDecimalSI), F::kDecimalSI},
      {"1E-3", Dec(1, -3, F::kDecimalExponent), F::kDecimalExponent},
      {"1e3", Dec(1, 3, F::kDecimalExponent), F::kDecimalExponent},
      {"1E6", Dec(1, 6, F::kDecimalExponent), F::kDecimalExponent},
      {"1e9", Dec(1, 9, F::kDecimalExponent), F::kDecimalExponent},
      {"1E12", Dec(1, 12, F::kDecimalExponent), F::kDecimalExponent},
      {"1e15", Dec(1, 15, F::kDecimalExponent), F::kDecimalExponent},
      {"1E18", Dec(1, 18, F::kDecimalExponent), F::kDecimalExponent},
      {"1e14", Dec(1, 14, F::kDecimalExponent), F::kDecimalExponent},
      {"1e13", Dec(1, 13, F::kDecimalExponent), F::kDecimalExponent},
      {"100.035k", Dec(100035, 0, F::kDecimalSI), F::kDecimalSI},
      {"0.001", Dec(1, -3, F::kDecimalSI), F::kDecimalSI},
      {"0.0005k", Dec(5, -1, F::kDecimalSI), F::kDecimalSI},
      {"0.005", Dec(5, -3, F::kDecimalSI), F::kDecimalSI},
      {"0.05", Dec(5, -2, F::kDecimalSI), F::kDecimalSI},
      {"0.5", Dec(5, -1, F::kDecimalSI), F::kDecimalSI},
      {"0.00050k", Dec(5, -1, F::kDecimalSI), F::kDecimalSI},
      {"0.00500", Dec(5, -3, F::kDecimalSI), F::kDecimalSI},
      {"0.05000", Dec(5, -2, F::kDecimalSI), F::kDecimalSI},
      {"0.50000", Dec(5, -1, F::kDecimalSI), F::kDecimalSI},
      {"0.5e0", Dec(5, -1, F::kDecimalExponent), F::kDecimalExponent},
      {"0.5e-1", Dec(5, -2, F::kDecimalExponent), F::kDecimalExponent},
      {"0.5e-2", Dec(5, -3, F::kDecimalExponent), F::kDecimalExponent},
      {"10.035M", Dec(10035, 3, F::kDecimalSI), F::kDecimalSI},
      {"1.2e3", Dec(12, 2, F::kDecimalExponent), F::kDecimalExponent},
      {"1.3E+6", Dec(13, 5, F::kDecimalExponent), F::kDecimalExponent},
      {"1.40e9", Dec(14, 8, F::kDecimalExponent), F::kDecimalExponent},
      {"1.53E12", Dec(153, 10, F::kDecimalExponent), F::kDecimalExponent},
      {"1.6e15", Dec(16, 14, F::kDecimalExponent), F::kDecimalExponent},
      {"1.7E18", Dec(17, 17, F::kDecimalExponent), F::kDecimalExponent},
      {"9.01", Dec(901, -2, F::kDecimalSI), F::kDecimalSI},
      {"8.1k", Dec(81, 2, F::kDecimalSI), F::kDecimalSI},
      {"7.123456M", Dec(7123456, 0, F::kDecimalSI), F::kDecimalSI},
      {"6.987654321G", Dec(6987654321LL, 0, F::kDecimalSI), F::kDecimalSI},
      {"5.444T", Dec(5444, 9, F::kDecimalSI), F::kDecimalSI},
      {"40.1T", Dec(401, 11, F::kDecimalSI), F::kDecimalSI},
      {"300.2T", Dec(3002, 11, F::kDecimalSI), F::kDecimalSI},
      {"2.5P", Dec(25, 14, F::kDecimalSI), F::kDecimalSI},
      {"1.01E", Dec(101, 16, F::kDecimalSI), F::kDecimalSI},
      // Things that saturate/round
      {"3.001n", Dec(4, -9, F::kDecimalSI), F::kDecimalSI},
      {"1.1E-9", Dec(2, -9, F::kDecimalExponent), F::kDecimalExponent},
      {"0.0000000001", Dec(1, -9, F::kDecimalSI), F::kDecimalSI},
      {"0.0000000005", Dec(1, -9, F::kDecimalSI), F::kDecimalSI},
      {"0.00000000050", Dec(1, -9, F::kDecimalSI), F::kDecimalSI},
      {"0.5e-9", Dec(1, -9, F::kDecimalExponent), F::kDecimalExponent},
      {"0.9n", Dec(1, -9, F::kDecimalSI), F::kDecimalSI},
      {"0.00000012345", Dec(124, -9, F::kDecimalSI), F::kDecimalSI},
      {"0.00000012354", Dec(124, -9, F::kDecimalSI), F::kDecimalSI},
      {"9Ei", Max(F::kBinarySI), F::kBinarySI},
      {"9223372036854775807Ki", Max(F::kBinarySI), F::kBinarySI},
      {"12E", Dec(12, 18, F::kDecimalSI), F::kDecimalSI},
      // fractional binary
      {"100.035Ki", Dec(10243584, -2, F::kBinarySI), F::kBinarySI},
      {"0.5Mi", Dec(512 * 1024, 0, F::kBinarySI), F::kBinarySI},
      {"0.05Gi", Dec(536870912, -1, F::kBinarySI), F::kBinarySI},
      {"0.025Ti", Dec(274877906944LL, -1, F::kBinarySI), F::kBinarySI},
      // "Things written by trolls"
      {"0.000000000001Ki", Dec(2, -9, F::kDecimalSI), F::kDecimalSI},
      {".001", Dec(1, -3, F::kDecimalSI), F::kDecimalSI},
      {".0001k", Dec(100, -3, F::kDecimalSI), F::kDecimalSI},
      {"1.", Dec(1, 0, F::kDecimalSI), F::kDecimalSI},
      {"1.G", Dec(1, 9, F::kDecimalSI), F::kDecimalSI},
  };
}

TEST(Quantity, ParseTableFromKubernetes) {
  for (const auto& c : ParseTable()) {
    for (const char* prefix : {"", "+", "-"}) {
      std::string in = std::string(prefix) + c.in;
      auto q = Quantity::Parse(in);
      ASSERT_TRUE(q.ok()) << in << ": " << q.status().ToString();
      Quantity want = c.want;
      if (std::string(prefix) == "-") want = *Quantity().Sub(c.want);
      EXPECT_EQ(q->Compare(want), 0) << in << ": got " << q->ToString() << " want " << want.ToString();
      EXPECT_EQ(q->format(), c.format) << in;
    }
  }
}

TEST(Quantity, InvalidFromKubernetes) {
  for (const char* in : {"", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
                         "1e4294967297", " 1", "1 ", "E2147483648", "1E2147483648", "1e-2147483648"}) {
    EXPECT_FALSE(Quantity::Parse(in).ok()) << "'" << in << "' parsed";
  }
  EXPECT_TRUE(Quantity::Parse("1e2147483647").ok());
  EXPECT_TRUE(Quantity::Parse("1E-2147483647").ok());
}

TEST(Quantity, CmpFromKubernetes) {
  struct {
    const char* x;
    const char* y;
    int want;
  } table[] = {{"0", "0", 0}, {"100m", "50m", 1}, {"50m", "100m", -1}, {"10000T", "100Gi", 1}};
  for (const auto& c : table) {
    EXPECT_EQ(Quantity::Parse(c.x)->Compare(*Quantity::Parse(c.y)), c.want) << c.x << " vs " << c.y;
    EXPECT_EQ(Quantity::Parse(c.y)->Compare(*Quantity::Parse(c.x)), -c.want) << c.y << " vs " << c.x;
  }
}

TEST(Quantity, CanonicalStringFromKubernetes) {
  struct {
    Quantity in;
    const char* want;
    const char* alternate;
  } table[] = {
      {Dec(1024LL * 1024 * 1024, 0, F::kBinarySI), "1Gi", "1024Mi"},
      {Dec(300LL * 1024 * 1024, 0, F::kBinarySI), "300Mi", "307200Ki"},
      {Dec(6 * 1024, 0, F::kBinarySI), "6Ki", ""},
      {Dec(1001LL * 1024 * 1024 * 1024, 0, F::kBinarySI), "1001Gi", "1025024Mi"},
      {Dec(1024LL * 1024 * 1024 * 1024, 0, F::kBinarySI), "1Ti", "1024Gi"},
      {Dec(5, 0, F::kBinarySI), "5", "5000m"},
      {Dec(500, -3, F::kBinarySI), "500m", "0.5"},
      {Dec(1, 9, F::kDecimalSI), "1G", "1000M"},
      {Dec(1000, 6, F::kDecimalSI), "1G", "0.001T"},
      {Dec(1000000, 3, F::kDecimalSI), "1G", ""},
      {Dec(1000000000, 0, F::kDecimalSI), "1G", ""},
      {Dec(1, -3, F::kDecimalSI), "1m", "1000u"},
      {Dec(80, -3, F::kDecimalSI), "80m", ""},
      {Dec(1080, -3, F::kDecimalSI), "1080m", "1.08"},
      {Dec(108, -2, F::kDecimalSI), "1080m", "1080000000n"},
      {Dec(10800, -4, F::kDecimalSI), "1080m", ""},
      {Dec(300, 6, F::kDecimalSI), "300M", ""},
      {Dec(1, 12, F::kDecimalSI), "1T", ""},
      {Dec(1, 18, F::kDecimalSI), "1E", ""},
      {Dec(1, 21, F::kDecimalSI), "1e21", "1000E"},
      {Dec(5, 21, F::kDecimalSI), "5e21", "5000E"},
      {Dec(1, 24, F::kDecimalSI), "1e24", "1000000E"},
      {Dec(1, 70, F::kBinarySI), "10e69", ""},
      {Dec(2, 70, F::kBinarySI), "20e69", ""},
      {Dec(1, 72, F::kBinarySI), "1e72", ""},
      {Dec(1234567, 6, F::kDecimalSI), "1234567M", ""},
      {Dec(1234567, -3, F::kBinarySI), "1234567m", ""},
      {Dec(3, 3, F::kDecimalSI), "3k", ""},
      {Dec(1025, 0, F::kBinarySI), "1025", ""},
      {Dec(0, 0, F::kDecimalSI), "0", ""},
      {Dec(0, 0, F::kBinarySI), "0", ""},
      {Dec(1, 9, F::kDecimalExponent), "1e9", ".001e12"},
      {Dec(1, -3, F::kDecimalExponent), "1e-3", "0.001e0"},
      {Dec(1, -9, F::kDecimalExponent), "1e-9", "1000e-12"},
      {Dec(80, -3, F::kDecimalExponent), "80e-3", ""},
      {Dec(300, 6, F::kDecimalExponent), "300e6", ""},
      {Dec(1, 12, F::kDecimalExponent), "1e12", ""},
      {Dec(1, 3, F::kDecimalExponent), "1e3", ""},
      {Dec(3, 3, F::kDecimalExponent), "3e3", ""},
      {Dec(0, 0, F::kDecimalExponent), "0", "00"},
      {Dec(1, -9, F::kDecimalSI), "1n", ""},
      {Dec(80, -9, F::kDecimalSI), "80n", ""},
      {Dec(1080, -9, F::kDecimalSI), "1080n", ""},
      {Dec(108, -8, F::kDecimalSI), "1080n", ""},
      {Dec(10800, -10, F::kDecimalSI), "1080n", ""},
      {Dec(1, -6, F::kDecimalSI), "1u", ""},
      {Dec(80, -6, F::kDecimalSI), "80u", ""},
      {Dec(1080, -6, F::kDecimalSI), "1080u", ""},
  };
  for (const auto& c : table) {
    EXPECT_EQ(c.in.ToString(), c.want);
    auto back = Quantity::Parse(c.want);
    ASSERT_TRUE(back.ok()) << c.want;
    EXPECT_EQ(back->ToString(), c.want);
    EXPECT_EQ(back->Compare(c.in), 0) << c.want;
    if (*c.alternate) {
      auto alt = Quantity::Parse(c.alternate);
      ASSERT_TRUE(alt.ok()) << c.alternate;
      EXPECT_EQ(alt->ToString(), c.want) << c.alternate;
    }
    if (c.in.Sign() != 0) {
      EXPECT_EQ(Quantity().Sub(c.in)->ToString(), std::string("-") + c.want);
    }
  }
}

TEST(Quantity, ParseEmitFromKubernetes) {
  struct {
    const char* in;
    const char* want;
  } table[] = {{"1Ki", "1Ki"},        {"1Mi", "1Mi"},           {"1Gi", "1Gi"},
               {"1024Mi", "1Gi"},     {"1000M", "1G"},          {".001Ki", "1024m"},
               {".000001Ki", "1024u"}, {".000000001Ki", "1024n"}, {".000000000001Ki", "2n"}};
  for (const auto& c : table) {
    EXPECT_EQ(Quantity::Parse(c.in)->ToString(), c.want) << c.in;
    EXPECT_EQ(Quantity::Parse(std::string("-") + c.in)->ToString(), std::string("-") + c.want) << c.in;
  }
  // TestBinarySIZeroExponentString
  EXPECT_EQ(Dec(2000, 0, F::kBinarySI).ToString(), "2000");
  EXPECT_EQ(Dec(-2000, 0, F::kBinarySI).ToString(), "-2000");
}

TEST(Quantity, AddSubZeroPreservesSuffixFromKubernetes) {
  for (const char* v : {"100m", "1Gi"}) {
    Quantity q = *Quantity::Parse(v);
    Quantity zero = *Quantity::Parse("0");
    EXPECT_EQ(q.Add(zero)->ToString(), v);
    EXPECT_EQ(zero.Add(q)->ToString(), v);
    EXPECT_EQ(q.Sub(zero)->ToString(), v);
    EXPECT_EQ(zero.Sub(q)->ToString(), std::string("-") + v);
  }
}

TEST(Quantity, GpuMemoryEdgeCases) {
  // H100 80GB HBM3 reports 81559 MiB; A100 80GB reports 81920 MiB (dra-reference.md §8 pitfall 1).
  Quantity h100 = *Quantity::Parse("81559Mi");
  Quantity a100 = *Quantity::Parse("81920Mi");
  EXPECT_LT(h100.Compare(*Quantity::Parse("80Gi")), 0);
  EXPECT_EQ(a100.Compare(*Quantity::Parse("80Gi")), 0);
  EXPECT_GT(h100.Compare(*Quantity::Parse("80G")), 0);
  EXPECT_GT(h100.Compare(*Quantity::Parse("79Gi")), 0);
  EXPECT_EQ(a100.ToString(), "80Gi");
  EXPECT_EQ(Quantity::Parse("85520809984")->Compare(h100), 0);  // bytes form of 81559Mi
}

TEST(Quantity, IntegerConversions) {
  EXPECT_EQ(*Quantity::Parse("1Ki")->AsInt64(), 1024);
  EXPECT_FALSE(Quantity::Parse("1500m")->AsInt64().has_value());
  EXPECT_FALSE(Quantity::Parse("100E")->AsInt64().has_value());
  EXPECT_EQ(*Quantity::Parse("-9223372036854775807")->AsInt64(), -9223372036854775807LL);
  EXPECT_DOUBLE_EQ(Quantity::Parse("1500m")->AsApproximateFloat(), 1.5);
  EXPECT_EQ(Quantity::Parse("-1m")->Sign(), -1);
  EXPECT_EQ(Quantity::Parse("1.5")->Add(*Quantity::Parse("500m"))->ToString(), "2");
  EXPECT_EQ(Quantity::Parse("1Gi")->Sub(*Quantity::Parse("512Mi"))->ToString(), "512Mi");
}

}  // namespace
}  // namespace draguard::k8s
