// The rotation plan of tls.mode=self with an injected time: create, reuse, leaf renewal, CA
// rotation with overlap, propagation delay, expired old CAs, broken Secrets.
#include "draguard/certs/plan.h"

#include <gtest/gtest.h>

namespace draguard::certs {
namespace {

using std::chrono::hours;
using Days = std::chrono::duration<int64_t, std::ratio<86400>>;

const std::vector<std::string> kDns = ServiceDnsNames("dg", "ns");
const TimePoint kT0 = std::chrono::system_clock::from_time_t(1767225600);  // 2026-01-01

RotationPolicy Policy() {
  RotationPolicy p;
  p.ca_validity = Days(300);
  p.leaf_validity = Days(30);
  return p;
}

Material Fresh(TimePoint t = kT0) {
  auto m = Apply(Action::kCreate, Material{}, kDns, t, Policy());
  EXPECT_TRUE(m.ok()) << m.status().message();
  return *m;
}

std::size_t BundleSize(const Material& m) { return SplitBundle(m.ca_crt)->size(); }

TEST(PlanTest, NoSecretIsCreatedAndThenReused) {
  EXPECT_EQ(Decide(Material{}, kDns, kT0, Policy()).action, Action::kCreate);
  Material m = Fresh();
  EXPECT_EQ(Decide(m, kDns, kT0, Policy()).action, Action::kNone);
  EXPECT_EQ(Decide(m, kDns, kT0 + Days(19), Policy()).action, Action::kNone);
  auto leaf = Inspect(m.tls_crt);
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(leaf->dns, kDns);
  EXPECT_FALSE(leaf->is_ca);
  EXPECT_TRUE(SignedBy(m.tls_crt, m.ca_crt));
  EXPECT_TRUE(KeyMatches(m.tls_crt, m.tls_key));
  EXPECT_TRUE(KeyMatches(m.ca_crt, m.ca_key));
}

TEST(PlanTest, LeafIsRenewedAtTwoThirdsOfItsLife) {
  Material m = Fresh();
  TimePoint t = kT0 + Days(21);
  Decision d = Decide(m, kDns, t, Policy());
  ASSERT_EQ(d.action, Action::kRenewLeaf) << d.reason;
  auto next = Apply(d.action, m, kDns, t, Policy());
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->ca_crt, m.ca_crt);  // the bundle does not change on a leaf renewal
  EXPECT_NE(next->tls_crt, m.tls_crt);
  EXPECT_TRUE(SignedBy(next->tls_crt, next->ca_crt));
  EXPECT_EQ(Decide(*next, kDns, t, Policy()).action, Action::kNone);
}

TEST(PlanTest, CaRotationKeepsTheOldCaAndSwitchesTheLeafAfterPropagation) {
  RotationPolicy p = Policy();
  Material m = Fresh();
  const std::string old_ca = m.ca_crt;
  TimePoint t = kT0 + Days(201);  // past 2/3 of 300 days
  std::vector<Decision> steps;
  auto r = Converge(m, kDns, t, p, &steps);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front().action, Action::kRotateCa);
  ASSERT_EQ(BundleSize(*r), 2u);
  EXPECT_EQ(SplitBundle(r->ca_crt)->back(), *SplitBundle(old_ca)->begin());  // old CA still trusted
  EXPECT_TRUE(KeyMatches(SplitBundle(r->ca_crt)->front(), r->ca_key));
  // The leaf was renewed at 2/3 anyway here (day 201 > 20); issue a fresh rotation case where the
  // leaf is young: rotate, then the leaf must stay with the old CA during propagation.
  Material young = *Apply(Action::kRenewLeaf, m, kDns, t, p);  // leaf issued at t by the old CA
  Material rotated = *Apply(Action::kRotateCa, young, kDns, t, p);
  EXPECT_EQ(rotated.tls_crt, young.tls_crt);
  EXPECT_EQ(Decide(rotated, kDns, t + std::chrono::minutes(1), p).action, Action::kNone);
  Decision d = Decide(rotated, kDns, t + p.propagation + std::chrono::minutes(1), p);
  ASSERT_EQ(d.action, Action::kRenewLeaf) << d.reason;
  Material switched = *Apply(d.action, rotated, kDns, t + p.propagation + std::chrono::minutes(1), p);
  EXPECT_TRUE(SignedBy(switched.tls_crt, SplitBundle(switched.ca_crt)->front()));
  EXPECT_EQ(BundleSize(switched), 2u);
  // The old CA leaves the bundle when it expires (day 300), not before.
  EXPECT_EQ(Decide(switched, kDns, kT0 + Days(215), p).action, Action::kNone);
  TimePoint expired = kT0 + Days(301);
  auto later = Converge(switched, kDns, expired, p, &steps);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(BundleSize(*later), 1u);
  EXPECT_EQ(SplitBundle(later->ca_crt)->front(), SplitBundle(switched.ca_crt)->front());
}

TEST(PlanTest, LeafNeverOutlivesItsCa) {
  RotationPolicy p = Policy();
  p.leaf_validity = Days(400);
  Material m = Fresh();
  EXPECT_LE(Inspect(m.tls_crt)->not_after, Inspect(m.ca_crt)->not_after);
}

TEST(PlanTest, BrokenSecretsAreReplacedOrRepaired) {
  Material m = Fresh();
  Material garbage = m;
  garbage.ca_crt = "not pem";
  EXPECT_EQ(Decide(garbage, kDns, kT0, Policy()).action, Action::kReplace);
  Material wrong_key = m;
  wrong_key.ca_key = Fresh().ca_key;
  EXPECT_EQ(Decide(wrong_key, kDns, kT0, Policy()).action, Action::kReplace);
  EXPECT_EQ(Decide(m, kDns, kT0 + Days(301), Policy()).action, Action::kReplace);  // CA expired
  Material no_leaf = m;
  no_leaf.tls_crt.clear();
  EXPECT_EQ(Decide(no_leaf, kDns, kT0, Policy()).action, Action::kRenewLeaf);
  Material leaf_key = m;
  leaf_key.tls_key = m.ca_key;
  EXPECT_EQ(Decide(leaf_key, kDns, kT0, Policy()).action, Action::kRenewLeaf);
  Material foreign = m;
  Material other = Fresh();
  foreign.tls_crt = other.tls_crt;
  foreign.tls_key = other.tls_key;
  EXPECT_EQ(Decide(foreign, kDns, kT0, Policy()).action, Action::kRenewLeaf);
  // Another service name: the SANs no longer cover it.
  EXPECT_EQ(Decide(m, ServiceDnsNames("other", "ns"), kT0, Policy()).action, Action::kRenewLeaf);
  for (const Material& bad : {garbage, wrong_key, no_leaf, leaf_key, foreign}) {
    auto fixed = Converge(bad, kDns, kT0, Policy());
    ASSERT_TRUE(fixed.ok());
    EXPECT_EQ(Decide(*fixed, kDns, kT0, Policy()).action, Action::kNone);
  }
}

// Extra names (the host of an out-of-cluster webhook URL) may be IP addresses: IP SANs, checked
// as such, and a certificate without one is renewed.
TEST(PlanTest, IpAddressNamesBecomeIpSans) {
  std::vector<std::string> names = kDns;
  names.push_back("127.0.0.1");
  names.push_back("0:0::1");
  Material m = Fresh();
  Decision d = Decide(m, names, kT0, Policy());
  ASSERT_EQ(d.action, Action::kRenewLeaf) << d.reason;
  EXPECT_EQ(d.reason, "tls.crt does not cover 127.0.0.1");
  auto next = Apply(d.action, m, names, kT0, Policy());
  ASSERT_TRUE(next.ok()) << next.status().message();
  auto leaf = Inspect(next->tls_crt);
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(leaf->dns, kDns);
  EXPECT_EQ(leaf->ips, (std::vector<std::string>{"127.0.0.1", "::1"}));
  EXPECT_EQ(Decide(*next, names, kT0, Policy()).action, Action::kNone);
  EXPECT_EQ(CanonicalIp("dg.ns.svc"), "");
  EXPECT_EQ(CanonicalIp("0:0::1"), "::1");
}

TEST(PlanTest, ServiceDnsNames) {
  EXPECT_EQ(ServiceDnsNames("s", "n"),
            (std::vector<std::string>{"s", "s.n", "s.n.svc", "s.n.svc.cluster.local"}));
}

TEST(PkiTest, BadInputIsAnError) {
  EXPECT_FALSE(Inspect("").ok());
  EXPECT_FALSE(SplitBundle("-----BEGIN CERTIFICATE-----\nAAAA").ok());
  EXPECT_FALSE(SplitBundle("").ok());
  EXPECT_FALSE(KeyMatches("x", "y"));
  EXPECT_FALSE(SignedBy("x", "y"));
  EXPECT_FALSE(GenerateCa("x", kT0, kT0).ok());
  EXPECT_FALSE(IssueServing(PemPair{"x", "y"}, kDns, kT0, kT0 + hours(1)).ok());
}

}  // namespace
}  // namespace draguard::certs
