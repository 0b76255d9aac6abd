#include "template/chat_template.h"

#include "template/interpreter.h"
#include "template/parser.h"

namespace hearth {

namespace {

// What Jinja2's lexer reads (newline_sequence "\n", keep_trailing_newline False): every "\r\n" and "\r" becomes
// "\n", and one final newline is dropped.
std::string jinja_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
      continue;
    }
    out += '\n';
    if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  try {
    ChatTemplate result;
    result.program_ = std::make_shared<const tmpl::Program>(tmpl::parse_program(jinja_source(source)));
    result.source_ = std::string(source);
    return result;
  } catch (const tmpl::TemplateError& error) {
    return make_error("chat template: {}", error.message);
  } catch (const std::exception& error) {
    return make_error("chat template: {}", error.what());
  }
}

ChatTemplate ChatTemplate::fallback() {
  Result<ChatTemplate> parsed = parse(kFallbackSource);
  HEARTH_CHECK(parsed.ok(), "the built-in fallback chat template must parse: {}",
               parsed.ok() ? "" : parsed.error().message);
  parsed->is_fallback_ = true;
  return std::move(parsed).value();
}

ChatTemplate ChatTemplate::from_gguf(const GgufFile& file, std::string* warning) {
  std::string why;
  Result<std::optional<std::string>> source = file.get_string("tokenizer.chat_template");
  if (!source.ok()) {
    why = "cannot read tokenizer.chat_template (" + source.error().message + "); using the fallback chat format";
  } else if (!source->has_value()) {
    why = "the model has no tokenizer.chat_template; using the fallback chat format";
  } else {
    Result<ChatTemplate> parsed = parse(**source);
    if (parsed.ok()) {
      if (warning != nullptr) warning->clear();
      return std::move(parsed).value();
    }
    why = parsed.error().message + "; using the fallback chat format";
  }
  if (warning != nullptr) *warning = why;
  return fallback();
}

template <class Json>
Result<std::string> ChatTemplate::render_impl(const Json& messages, const Json& tools, bool add_generation_prompt,
                                              const std::string& bos_token, const std::string& eos_token,
                                              const Json& extra) const {
  if (!program_) return make_error("chat template: not initialized (use parse, from_gguf or fallback)");
  if (!messages.is_array()) return make_error("chat template: messages must be a JSON array");
  if (!extra.is_null() && !extra.is_object()) return make_error("chat template: extra variables must be an object");
  try {
    tmpl::Object globals;
    globals.set("messages", tmpl::Value::from_json(messages));
    globals.set("tools", tools.is_null() ? tmpl::Value::none() : tmpl::Value::from_json(tools));
    globals.set("add_generation_prompt", tmpl::Value(add_generation_prompt));
    globals.set("bos_token", tmpl::Value(bos_token));
    globals.set("eos_token", tmpl::Value(eos_token));
    if (extra.is_object()) {
      for (auto it = extra.begin(); it != extra.end(); ++it) globals.set(it.key(), tmpl::Value::from_json(it.value()));
    }
    const tmpl::Limits limits{limits_.max_steps, limits_.max_depth, limits_.max_output_bytes};
    tmpl::Clock clock = clock_ ? clock_ : tmpl::Clock([] { return std::chrono::system_clock::now(); });
    tmpl::Interpreter interpreter(*program_, std::move(globals), limits, std::move(clock));
    return interpreter.render();
  } catch (const tmpl::TemplateError& error) {
    if (error.raised) return Error{error.message};
    return make_error("chat template: {}", error.message);
  } catch (const std::exception& error) {
    return make_error("chat template: {}", error.what());
  }
}

Result<std::string> ChatTemplate::render(const nlohmann::json& messages, const nlohmann::json& tools,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, const nlohmann::json& extra) const {
  return render_impl(messages, tools, add_generation_prompt, bos_token, eos_token, extra);
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, const nlohmann::ordered_json& extra) const {
  return render_impl(messages, tools, add_generation_prompt, bos_token, eos_token, extra);
}

}  // namespace hearth
