#include "server/api/chat.h"

#include <algorithm>
#include <map>
#include <string>

#include "server/api/harmony.h"
#include "template/chat_template.h"

namespace hearth::server {
namespace {

using nlohmann::json;

// A call as the generic tool prompt asks for it, name first: {"name": ..., "arguments": {...}}.
nlohmann::ordered_json generic_call(const json& call) {
  const json& f = call.value("function", json::object());
  nlohmann::ordered_json out;
  out["name"] = f.value("name", json(""));
  out["arguments"] = f.value("arguments", json::object());
  return out;
}

class TemplateFormatter final : public ChatFormatter {
 public:
  TemplateFormatter(ChatTemplate tmpl, std::string bos, std::string eos, bool harmony_tokens)
      : tmpl_(std::move(tmpl)),
        bos_(std::move(bos)),
        eos_(std::move(eos)),
        harmony_(harmony_tokens && tmpl_.source().find("<|channel|>") != std::string::npos),
        generic_tools_(!tmpl_.is_fallback() && tmpl_.source().find("tools") == std::string::npos),
        tool_format_(tmpl_.is_fallback() || generic_tools_ ? ToolCallFormat::kJson
                                                           : detect_tool_call_format(tmpl_.source())) {}

  Result<std::string> render(const json& messages, const json& tools, const json& extra) const override {
    return render_with(messages, tools, extra, /*generation_prompt=*/true);
  }

  Result<ContinuedChat> render_continued(const json& messages, const json& tools, const json& extra) const override;
  ToolCallFormat tool_call_format() const override { return tool_format_; }
  bool harmony() const override { return harmony_; }
  std::string describe() const override {
    if (tmpl_.is_fallback()) return "the fallback chat format (\"User: ...\\nAssistant:\")";
    if (harmony_) return "the model's chat template (harmony: channels and tool calls parsed)";
    if (tool_format_ == ToolCallFormat::kGemma4) {
      return "the model's chat template (gemma4: thinking and tool calls parsed)";
    }
    return generic_tools_ ? "the model's chat template (it has no tools: Hearth's generic tool prompt, JSON calls)"
                          : "the model's chat template";
  }

 private:
  Result<std::string> render_with(const json& messages, const json& tools, const json& extra,
                                  bool generation_prompt) const {
    if (harmony_) {
      return tmpl_.render(harmony_template_messages(messages), harmony_template_tools(tools), generation_prompt, bos_,
                          eos_, extra);
    }
    if (!generic_tools_ || !uses_tools(messages, tools)) {
      return tmpl_.render(messages, tools, generation_prompt, bos_, eos_, extra);
    }
    // The template knows no tools: the catalogue goes into the system prompt, calls and results become text.
    const std::string prompt = tools.is_array() && !tools.empty() ? generic_tool_prompt(tools) : std::string();
    const json adapted = without_tool_roles(messages);
    auto rendered = tmpl_.render(with_tool_prompt(adapted, prompt, /*as_system=*/true), json(), generation_prompt, bos_,
                                 eos_, extra);
    // A template that refuses a system message, or drops it (Phi-3's prints only user and assistant turns): the
    // catalogue leads the first user message instead.
    if (prompt.empty() || (rendered && rendered->find(prompt) != std::string::npos)) return rendered;
    return tmpl_.render(with_tool_prompt(adapted, prompt, /*as_system=*/false), json(), generation_prompt, bos_, eos_,
                        extra);
  }
  static bool uses_tools(const json& messages, const json& tools) {
    if (tools.is_array() && !tools.empty()) return true;
    for (const json& m : messages) {
      if (m.value("role", json()) == "tool" || m.contains("tool_calls")) return true;
    }
    return false;
  }

  static std::string generic_tool_prompt(const json& tools) {
    std::string out =
        "You can call tools. To call one, answer with only a JSON object {\"name\": <tool name>, \"arguments\": "
        "<arguments object>} and nothing else. The tools:";
    for (const json& t : tools) {
      const json& f = t["function"];
      nlohmann::ordered_json entry;  // in this order: name, description, parameters
      entry["name"] = f["name"];
      if (f.contains("description")) entry["description"] = f["description"];
      entry["parameters"] = f.value("parameters", json::object());
      out += '\n';
      out += entry.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    return out;
  }

  // Assistant tool_calls become their JSON in the content; tool results become user text naming the function
  // (found by the call id); consecutive user messages are joined, as templates that alternate roles require.
  static json without_tool_roles(const json& messages) {
    json out = json::array();
    std::map<std::string, std::string> names;  // call id -> function name
    bool last_from_tool = false;               // out.back() holds a tool result
    for (const json& m : messages) {
      json message = m;
      const std::string role = m.value("role", std::string());
      if (role == "assistant" && m.contains("tool_calls")) {
        nlohmann::ordered_json calls = nlohmann::ordered_json::array();
        for (const json& c : m["tool_calls"]) {
          calls.push_back(generic_call(c));
          if (c.contains("id") && c["id"].is_string()) {
            names[c["id"].get<std::string>()] = calls.back()["name"].get<std::string>();
          }
        }
        std::string content = m.value("content", json("")).is_string() ? m["content"].get<std::string>() : "";
        if (!content.empty()) content += "\n";
        content += (calls.size() == 1 ? calls[0] : calls).dump(-1, ' ', false, json::error_handler_t::replace);
        message = {{"role", "assistant"}, {"content", std::move(content)}};
      } else if (role == "tool") {
        const std::string id =
            m.value("tool_call_id", json("")).is_string() ? m["tool_call_id"].get<std::string>() : "";
        const auto name = names.find(id);
        const std::string content = m.value("content", json("")).is_string() ? m["content"].get<std::string>() : "";
        message = {{"role", "user"},
                   {"content",
                    (name != names.end() ? "Result of " + name->second : std::string("Tool result")) + ": " + content}};
      }
      const bool from_tool = role == "tool";
      if (!out.empty() && message["role"] == "user" && out.back()["role"] == "user" && (from_tool || last_from_tool)) {
        out.back()["content"] =
            out.back()["content"].get<std::string>() + "\n\n" + message["content"].get<std::string>();
        last_from_tool = true;
        continue;
      }
      out.push_back(std::move(message));
      last_from_tool = from_tool;
    }
    return out;
  }

  static json with_tool_prompt(json messages, const std::string& prompt, bool as_system) {
    if (prompt.empty()) return messages;
    if (as_system) {
      if (!messages.empty() && (messages[0]["role"] == "system" || messages[0]["role"] == "developer")) {
        messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + prompt;
      } else {
        messages.insert(messages.begin(), json{{"role", "system"}, {"content", prompt}});
      }
      return messages;
    }
    for (json& m : messages) {
      if (m["role"] == "user") {
        m["content"] = prompt + "\n\n" + m["content"].get<std::string>();
        break;
      }
    }
    return messages;
  }

  ChatTemplate tmpl_;
  std::string bos_;
  std::string eos_;
  bool harmony_;
  bool generic_tools_;  // the template never mentions tools
  ToolCallFormat tool_format_;
};

// Appended to the final assistant message's content to find where the template printed its end: U+FFFE (a
// noncharacter) around a name. The last occurrence is taken: a client that sends the mark itself moves nothing.
constexpr std::string_view kContinueMark = "\xEF\xBF\xBEhearth-continue\xEF\xBF\xBE";

Result<ContinuedChat> TemplateFormatter::render_continued(const json& messages, const json& tools,
                                                          const json& extra) const {
  json marked = messages;
  json& last = marked.back();
  last["content"] = last.value("content", std::string()) + std::string(kContinueMark);
  auto text = render_with(marked, tools, extra, /*generation_prompt=*/false);
  if (!text) return text.error();
  const size_t end = text->rfind(kContinueMark);
  if (end == std::string::npos) {
    return Error{"the chat template does not print the final assistant message's text, so it cannot be continued"};
  }
  ContinuedChat out;
  out.text = text->substr(0, end);
  const json before(marked.begin(), marked.end() - 1);
  // Where the chat before the message, with its generation prompt, stops matching: the turn's own text begins (a
  // generation prompt that opens an empty thinking block, as Gemma 4's does, differs only after that).
  auto head = render_with(before, tools, extra, /*generation_prompt=*/true);
  if (head) {
    const auto diverge = std::mismatch(head->begin(), head->end(), out.text.begin(), out.text.end()).second;
    out.primer = std::string(diverge, out.text.end());
  }
  return out;
}

}  // namespace

std::unique_ptr<ChatFormatter> ChatFormatter::create(ChatTemplate chat_template, const Tokenizer& tokenizer) {
  std::string bos{tokenizer.token_text(tokenizer.bos())};
  std::string eos{tokenizer.token_text(tokenizer.eos())};
  const bool harmony_tokens = tokenizer.find_token("<|channel|>") && tokenizer.find_token("<|message|>");
  return std::make_unique<TemplateFormatter>(std::move(chat_template), std::move(bos), std::move(eos), harmony_tokens);
}

}  // namespace hearth::server
