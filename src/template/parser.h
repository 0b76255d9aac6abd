#pragma once
// Parser for the chat-template language (the Jinja subset documented in chat_template.h).

#include <string_view>

#include "template/ast.h"

namespace hearth::tmpl {

// Parses a template. Throws TemplateError("line:col: ...") naming the syntax error or unsupported construct.
Program parse_program(std::string_view source);

}  // namespace hearth::tmpl
