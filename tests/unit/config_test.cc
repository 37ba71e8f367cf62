// vsocket/config.h: VSOCKET_SPIN_US and its default per machine.
#include "vsocket/config.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace vsocket {
namespace {

const char* Lookup(const char* name, void* context) {
  auto* env = static_cast<std::map<std::string, std::string>*>(context);
  auto it = env->find(name);
  return it == env->end() ? nullptr : it->second.c_str();
}

Config Parse(std::map<std::string, std::string> env) { return ParseConfig(Lookup, &env); }

TEST(SpinBudget, UnsetLeavesTheDefaultToTheMachine) {
  Config c = Parse({});
  EXPECT_FALSE(c.spin_us_named);
  EXPECT_EQ(c.spin_us, 200u);
}

TEST(SpinBudget, AValidValueIsNamedAndKeptEvenZero) {
  Config c = Parse({{"VSOCKET_SPIN_US", "0"}});
  EXPECT_TRUE(c.spin_us_named);
  EXPECT_EQ(c.spin_us, 0u);
  c = Parse({{"VSOCKET_SPIN_US", "2000"}});
  EXPECT_TRUE(c.spin_us_named);
  EXPECT_EQ(c.spin_us, 2000u);
}

TEST(SpinBudget, AnInvalidValueIsIgnoredAsIfUnset) {
  for (const char* bad : {"-1", "2000000", "fast", ""}) {
    Config c = Parse({{"VSOCKET_SPIN_US", bad}});
    EXPECT_FALSE(c.spin_us_named) << bad;
    EXPECT_EQ(c.spin_us, 200u) << bad;
  }
}

TEST(SpinBudget, OneCpuSpinsNeverMoreCpusSpinTheDefault) {
  EXPECT_EQ(DefaultSpinUs(1), 0u);
  EXPECT_EQ(DefaultSpinUs(0), 0u);   // unknown
  EXPECT_EQ(DefaultSpinUs(-1), 0u);  // sysconf failed
  EXPECT_EQ(DefaultSpinUs(2), 200u);
  EXPECT_EQ(DefaultSpinUs(256), 200u);
}

}  // namespace
}  // namespace vsocket
