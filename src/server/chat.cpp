#include "server/chat.h"

#include "template/chat_template.h"

namespace hearth::server {
namespace {

class TemplateFormatter final : public ChatFormatter {
 public:
  TemplateFormatter(ChatTemplate tmpl, std::string bos, std::string eos)
      : tmpl_(std::move(tmpl)),
        bos_(std::move(bos)),
        eos_(std::move(eos)),
        tool_format_(tmpl_.is_fallback() ? ToolCallFormat::kJson : detect_tool_call_format(tmpl_.source())) {}

  Result<std::string> render(const nlohmann::json& messages, const nlohmann::json& tools,
                             const nlohmann::json& extra) const override {
    return tmpl_.render(messages, tools, /*add_generation_prompt=*/true, bos_, eos_, extra);
  }
  ToolCallFormat tool_call_format() const override { return tool_format_; }
  std::string describe() const override {
    return tmpl_.is_fallback() ? "the fallback chat format (\"User: ...\\nAssistant:\")" : "the model's chat template";
  }

 private:
  ChatTemplate tmpl_;
  std::string bos_;
  std::string eos_;
  ToolCallFormat tool_format_;
};

}  // namespace

std::unique_ptr<ChatFormatter> ChatFormatter::create(ChatTemplate chat_template, const Tokenizer& tokenizer) {
  std::string bos{tokenizer.token_text(tokenizer.bos())};
  std::string eos{tokenizer.token_text(tokenizer.eos())};
  return std::make_unique<TemplateFormatter>(std::move(chat_template), std::move(bos), std::move(eos));
}

}  // namespace hearth::server
