#pragma once
// GrammarCompiler: a JSON schema (the subset grammar.h lists) to a Grammar's nodes. Internal to the grammar library:
// grammar_compile.cpp holds the structure (types, objects, arrays, combinators, $ref) and the entry points,
// grammar_compile_scalar.cpp the strings and numbers that need an automaton (pattern, format, bounds).
//
// Bounds (docs/security.md): at most 65,535 nodes, kMaxCompileCalls schema visits (a recursive $ref fanning out
// ends at kMaxRefDepth, but 64 alternatives deep would still be 64^6 visits), kMaxGrammarDfaStates automaton
// states in all, each automaton at most kMaxDfaStates.

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "grammar/grammar.h"

namespace hearth {

inline constexpr int32_t kMaxCompileCalls = 200'000;
inline constexpr int32_t kMaxGrammarDfaStates = 65'536;
// compile()'s "nothing can match here" (a $ref at its recursion bound): a parent drops the alternative, the
// optional property or the items, or is itself kNeverNode when it needs it.
inline constexpr int32_t kNeverNode = -1;

// Where a schema sits, for error messages only: a chain of parts rendered on demand, so compiling copies no paths
// (copying one per node would be quadratic in a wide, deep schema).
struct SchemaPath {
  const SchemaPath* parent = nullptr;
  std::string_view part;  // the root's name, ".properties." or ".items"
  std::string_view name;  // a property's name

  std::string str() const {
    std::string out = parent != nullptr ? parent->str() : std::string();
    out.append(part);
    out.append(name);
    return out;
  }
};

class GrammarCompiler {
 public:
  Grammar g;
  const nlohmann::json* root = nullptr;  // the document $ref points into
  GrammarSyntax syntax = GrammarSyntax::kJson;  // kGemma4: literals and listed keys in Gemma 4's call syntax

  int32_t add(GrammarNode node);
  int32_t literals(std::vector<std::string> values);
  int32_t simple(GrammarNodeKind kind);
  // Any JSON value: free objects and arrays of any values, strings, numbers, true/false/null.
  int32_t any();
  // The node of `schema`, or kNeverNode; an Error names the keyword and the path.
  Result<int32_t> compile(const nlohmann::json& schema, const SchemaPath& path);

 private:
  Result<int32_t> compile_keywords(const nlohmann::json& schema, const SchemaPath& path);
  Result<int32_t> compile_ref(const nlohmann::json& schema, const SchemaPath& path);
  Result<int32_t> compile_alternatives(const nlohmann::json& schema, const SchemaPath& path);
  Result<int32_t> compile_literals(const nlohmann::json& schema, const SchemaPath& path,
                                   const std::vector<std::string>& types);
  Result<int32_t> compile_type(const nlohmann::json& schema, const SchemaPath& path, const std::string& type);
  Result<int32_t> compile_object(const nlohmann::json& schema, const SchemaPath& path);
  Result<int32_t> compile_array(const nlohmann::json& schema, const SchemaPath& path);
  // A listed key as the output spells it: "name" in JSON, name: (its ':' included) in Gemma 4's syntax.
  std::string key_text(const std::string& name) const;
  // A union of `alternatives` without the kNeverNode ones (kNeverNode when none is left).
  int32_t union_of(std::vector<int32_t> alternatives);
  // grammar_compile_scalar.cpp
  Result<int32_t> compile_string(const nlohmann::json& schema, const SchemaPath& path);
  Result<int32_t> compile_integer(const nlohmann::json& schema, const SchemaPath& path);
  Result<int32_t> compile_number(const nlohmann::json& schema, const SchemaPath& path);
  // A kDfa node; the same `key` gives the same automaton, built once.
  Result<int32_t> dfa_node(const std::string& key, const SchemaPath& path,
                           const std::function<Result<ByteDfa>()>& build);

  int32_t any_ = -1;
  int32_t calls_ = 0;
  int64_t dfa_states_ = 0;
  std::unordered_map<std::string, int32_t> dfa_memo_;             // key -> index in g.dfas_
  std::unordered_map<const nlohmann::json*, int32_t> expanding_;  // $ref targets being expanded, and how deep
};

[[nodiscard]] Result<int32_t> read_count(const nlohmann::json& schema, const char* key, const SchemaPath& path,
                                         int32_t fallback);

}  // namespace hearth
