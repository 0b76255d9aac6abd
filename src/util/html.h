#pragma once
// Escaping text for HTML, SVG and XML: & < > " ' become entities, as Jinja's `escape` filter (markupsafe) writes
// them, so one escaper serves the chat templates and the benchmark's SVG charts.

#include <string>
#include <string_view>

namespace hearth {

[[nodiscard]] std::string html_escape(std::string_view text);

}  // namespace hearth
