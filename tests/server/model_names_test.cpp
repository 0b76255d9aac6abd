#include "server/models/model_names.h"

#include <gtest/gtest.h>

namespace hearth::server {
namespace {

TEST(ModelNames, AnyNameIsAcceptedUnlessStrict) {
  const ModelNames lenient{"stories260K", {}, false};
  for (const char* name : {"", "stories260K", "gpt-4o-mini", "gpt-3.5-turbo"}) {
    EXPECT_TRUE(lenient.accepts(name)) << name;
    EXPECT_FALSE(lenient.check(name).has_value()) << name;
  }
}

TEST(ModelNames, StrictNamesAcceptTheIdAndItsAliasesOnly) {
  const ModelNames strict{"stories260K", {"gpt-4o-mini", "house"}, true};
  for (const char* name : {"", "stories260K", "gpt-4o-mini", "house"}) EXPECT_TRUE(strict.accepts(name)) << name;
  auto error = strict.check("gpt-17");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 404);
  EXPECT_EQ(error->param, "model");
  EXPECT_EQ(error->code, "model_not_found");
  EXPECT_NE(error->message.find("'gpt-17'"), std::string::npos);
  EXPECT_NE(error->message.find("'house'"), std::string::npos);
}

TEST(ModelNames, TheListHasTheModelThenItsAliases) {
  const ModelNames names{"stories260K", {"gpt-4o-mini", "stories260K", "house"}, false};
  const auto list = model_list_json(names, 512, 16);
  ASSERT_EQ(list["data"].size(), 3u);  // an alias equal to the id is not listed twice
  EXPECT_EQ(list["data"][0]["id"], "stories260K");
  EXPECT_FALSE(list["data"][0]["meta"].contains("alias_of"));
  EXPECT_EQ(list["data"][1]["id"], "gpt-4o-mini");
  EXPECT_EQ(list["data"][1]["meta"]["alias_of"], "stories260K");
  EXPECT_EQ(list["data"][2]["id"], "house");
  EXPECT_EQ(list["data"][2]["meta"]["n_ctx"], 512);
}

}  // namespace
}  // namespace hearth::server
