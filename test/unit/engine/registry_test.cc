// The rule registry: the default list has every rule once, in ID order; a duplicate ID or a null
// rule fails loudly instead of being dropped.
#include "draguard/engine/registry.h"

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace draguard::engine {
namespace {

class FakeRule : public Rule {
 public:
  explicit FakeRule(std::string id) : id_(std::move(id)) {}
  std::string_view id() const override { return id_; }
  std::string_view name() const override { return "fake"; }
  policy::Action default_action() const override { return policy::Action::kWarn; }
  RuleResult Evaluate(const RuleInput&) const override { return {}; }

 private:
  std::string id_;
};

TEST(Registry, DefaultListHasEveryRuleOnceInOrder) {
  Registry r = DefaultRegistry();
  ASSERT_EQ(r.rules().size(), 17u);
  for (std::size_t i = 0; i < r.rules().size(); ++i) {
    char want[8];
    std::snprintf(want, sizeof want, "DG%03zu", i + 1);
    EXPECT_EQ(r.rules()[i]->id(), want);
    EXPECT_EQ(r.Find(want), r.rules()[i].get());
  }
  EXPECT_EQ(r.Find("DG999"), nullptr);
}

TEST(Registry, DuplicateIdThrows) {
  Registry r;
  r.Add(std::make_unique<FakeRule>("DG900"));
  try {
    r.Add(std::make_unique<FakeRule>("DG900"));
    FAIL() << "a duplicate rule ID was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("DG900"), std::string::npos);
  }
  EXPECT_EQ(r.rules().size(), 1u);
  EXPECT_THROW(r.Add(nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace draguard::engine
