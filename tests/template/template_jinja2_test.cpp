// Hearth's interpreter against Python's Jinja2: every case of jinja2_cases.json (the chat templates stored in the
// Llama 3, Qwen 3, Gemma 3 and Phi-3 vocabularies, the real templates in ../shared/templates and gpt-oss's harmony
// template in tests/data, with system prompts, multi-turn history, tools, Qwen 3's enable_thinking and <think>
// history, harmony's reasoning effort, built-in tools and tool rounds) renders to exactly the bytes
// of jinja2_golden/<case>.txt, which jinja2_render.py wrote with Jinja2 set up as HF's apply_chat_template.
// GoldenFilesAreJinja2sOutput reruns that script at test time, so the golden files cannot go stale.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "template/chat_template.h"

namespace hearth {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const std::string kTestDir = HEARTH_TEMPLATE_TEST_DIR;
const std::string kShared = HEARTH_SHARED_DIR;
const char* kPython = "/usr/bin/python3";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Json& spec() {
  static const Json parsed = Json::parse(read_file(kTestDir + "/jinja2_cases.json"));
  return parsed;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const Json& c : spec()["cases"]) names.push_back(c["name"].get<std::string>());
  return names;
}

const Json& find_case(const std::string& name) {
  for (const Json& c : spec()["cases"]) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no case " << name;
  static const Json none = Json::object();
  return none;
}

// The case's template: the GGUF's tokenizer.chat_template, or a .jinja file; clock pinned as jinja2_render.py's.
// "local:PATH" names a file beside this test.
Result<ChatTemplate> load_template(const std::string& spec_path) {
  const std::string path =
      spec_path.starts_with("local:") ? kTestDir + "/" + spec_path.substr(6) : kShared + "/" + spec_path;
  Result<ChatTemplate> t = make_error("unread");
  if (spec_path.ends_with(".gguf")) {
    Result<GgufFile> file = GgufFile::open(path);
    if (!file.ok()) return file.error();
    std::string warning;
    ChatTemplate from_file = ChatTemplate::from_gguf(*file, &warning);
    if (!warning.empty()) return make_error("{}: {}", path, warning);
    t = std::move(from_file);
  } else {
    t = ChatTemplate::parse(read_file(path));
  }
  if (t.ok()) t->set_clock([] { return std::chrono::system_clock::from_time_t(1721995200); });
  return t;
}

// What Hearth renders for a case, in the golden files' form ("raise_exception: <message>" for a template error).
std::string render_case(const Json& c) {
  Result<ChatTemplate> t = load_template(c["template"].get<std::string>());
  if (!t.ok()) return "load failed: " + t.error().message;
  const Json& messages = spec()["conversations"][c["messages"].get<std::string>()];
  const Json tools = c.contains("tools") ? spec()["tools"][c["tools"].get<std::string>()] : Json(nullptr);
  const Json extra = c.contains("extra") ? c["extra"] : Json::object();
  Result<std::string> out = t->render(messages, tools, c["add_generation_prompt"].get<bool>(),
                                      c["bos"].get<std::string>(), c["eos"].get<std::string>(), extra);
  return out.ok() ? *out : "raise_exception: " + out.error().message;
}

class Jinja2Golden : public testing::TestWithParam<std::string> {};

TEST_P(Jinja2Golden, HearthRendersExactlyAsJinja2) {
  const Json& c = find_case(GetParam());
  const std::string golden_path = kTestDir + "/jinja2_golden/" + GetParam() + ".txt";
  ASSERT_TRUE(fs::exists(golden_path)) << golden_path << " is missing: run jinja2_render.py";
  EXPECT_EQ(render_case(c), read_file(golden_path));
}

INSTANTIATE_TEST_SUITE_P(TemplateJinja2, Jinja2Golden, testing::ValuesIn(case_names()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

bool have_jinja2() {
  if (!fs::exists(kPython)) return false;
  return std::system((std::string(kPython) + " -c 'import jinja2' 2>/dev/null").c_str()) == 0;
}

TEST(TemplateJinja2, GoldenFilesAreJinja2sOutput) {
  if (!have_jinja2()) GTEST_SKIP() << kPython << " with jinja2 is missing (Debian: apt-get install python3-jinja2)";
  const std::string out_dir = std::string(HEARTH_TEST_TMP_DIR) + "/jinja2-" + std::to_string(getpid());
  fs::remove_all(out_dir);
  const std::string command =
      std::string(kPython) + " '" + kTestDir + "/jinja2_render.py' '" + kShared + "' '" + out_dir + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  for (const std::string& name : case_names()) {
    EXPECT_EQ(read_file(out_dir + "/" + name + ".txt"), read_file(kTestDir + "/jinja2_golden/" + name + ".txt"))
        << name << ": the committed golden file is stale; rerun " << command;
  }
  fs::remove_all(out_dir);
}

}  // namespace
}  // namespace hearth
