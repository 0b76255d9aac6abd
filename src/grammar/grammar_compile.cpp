// Grammar compilation: a JSON schema (the subset grammar.h lists), any JSON object, or tool-call branches, to the
// node graph grammar.cpp runs.

#include <algorithm>
#include <unordered_set>

#include "grammar/grammar.h"

namespace hearth {

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

namespace {

using nlohmann::json;
using Kind = GrammarNodeKind;

const char* const kAnnotations[] = {"title",  "description", "default", "examples",
                                    "format", "$schema",     "$id",     "$comment"};
constexpr size_t kNumSchemaTypes = 7;  // object array string number integer boolean null
constexpr size_t kMaxGrammarNodes = UINT16_MAX;

const char* const kKeywords[] = {"type",  "properties", "required", "additionalProperties",
                                 "items", "minItems",   "maxItems", "enum",
                                 "const", "minLength",  "maxLength"};

bool value_has_type(const json& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

// A value as Gemma 4's call syntax writes it (strings between <|"|>, keys bare), for enum/const literals.
std::string gemma4_text(const json& v) {
  if (v.is_string()) return "<|\"|>" + v.get<std::string>() + "<|\"|>";
  if (v.is_object()) {
    std::string out = "{";
    for (const auto& [key, value] : v.items()) {
      if (out.size() > 1) out += ',';
      out += key + ":" + gemma4_text(value);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const json& x : v) {
      if (out.size() > 1) out += ',';
      out += gemma4_text(x);
    }
    return out + "]";
  }
  return v.dump();
}

// A key Gemma 4's syntax can write bare and read back: no delimiter of its syntax, no space at its ends.
bool gemma4_bare_key(std::string_view key) {
  return !key.empty() && key.find_first_of(":{}[],<\"") == std::string_view::npos && key.front() != ' ' &&
         key.back() != ' ' && key.find_first_of("\t\r\n") == std::string_view::npos;
}

}  // namespace

// Builds a Grammar's nodes from a schema, recursively; errors name the schema path and keyword.
class GrammarCompiler {
 public:
  Grammar g;
  GrammarSyntax syntax = GrammarSyntax::kJson;

  int32_t add(GrammarNode node) {
    g.nodes_.push_back(std::move(node));
    return static_cast<int32_t>(g.nodes_.size() - 1);
  }

  int32_t literals(std::vector<std::string> values) {
    GrammarNode n;
    n.kind = Kind::kLiterals;
    n.literals = std::move(values);
    return add(std::move(n));
  }

  int32_t simple(Kind kind) {
    GrammarNode n;
    n.kind = kind;
    return add(std::move(n));
  }

  // Any JSON value: free objects and arrays of any values, strings, numbers, true/false/null.
  int32_t any() {
    if (any_ >= 0) return any_;
    GrammarNode u;
    u.kind = Kind::kUnion;
    any_ = add(std::move(u));
    GrammarNode obj;
    obj.kind = Kind::kObject;
    obj.free_keys = true;
    obj.free_key = simple(Kind::kString);
    obj.free_value = any_;
    const int32_t obj_id = add(std::move(obj));
    GrammarNode arr;
    arr.kind = Kind::kArray;
    arr.items = any_;
    const int32_t arr_id = add(std::move(arr));
    const int32_t str = simple(Kind::kString);
    const int32_t num = simple(Kind::kNumber);
    const int32_t lit = literals({"true", "false", "null"});
    g.nodes_[any_].alternatives = {obj_id, arr_id, str, num, lit};
    return any_;
  }

  Result<int32_t> compile(const json& schema, const SchemaPath& path) {
    // Nodes grow at most linearly with the schema, but a budget names the limit before the graph outgrows the
    // 16-bit node ids of GrammarFrame.
    if (g.nodes_.size() >= kMaxGrammarNodes) {
      return make_error("the schema at '{}' is too large: at most {} grammar nodes are supported", path.str(),
                        kMaxGrammarNodes);
    }
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return any();
      return make_error("the schema at '{}' is false: nothing can match it", path.str());
    }
    if (!schema.is_object()) return make_error("the schema at '{}' must be an object", path.str());
    for (const auto& [key, value] : schema.items()) {
      const bool known = std::find(std::begin(kKeywords), std::end(kKeywords), key) != std::end(kKeywords) ||
                         std::find(std::begin(kAnnotations), std::end(kAnnotations), key) != std::end(kAnnotations);
      if (!known) {
        return make_error(
            "JSON Schema keyword '{}' (at '{}') is not supported; supported: type, properties, "
            "required, additionalProperties (true/false), items, minItems, maxItems, enum, const, "
            "minLength, maxLength",
            key, path.str());
      }
    }
    std::vector<std::string> types;
    if (auto t = schema.find("type"); t != schema.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const json& x : *t) {
          if (!x.is_string()) return make_error("'{}.type' must be a string or an array of strings", path.str());
          // Kept distinct, so the checks below and compile_literals stay linear however often a name repeats.
          if (std::find(types.begin(), types.end(), x.get_ref<const std::string&>()) != types.end()) continue;
          types.push_back(x.get<std::string>());
          if (types.size() > kNumSchemaTypes) break;  // a name that is not a type: refused just below
        }
      } else {
        return make_error("'{}.type' must be a string or an array of strings", path.str());
      }
      for (const std::string& type : types) {
        if (!value_has_type(json(), type) && type != "object" && type != "array" && type != "string" &&
            type != "number" && type != "integer" && type != "boolean") {
          return make_error("'{}.type' \"{}\" is not a JSON Schema type", path.str(), type);
        }
      }
    }
    if (schema.contains("enum") || schema.contains("const")) return compile_literals(schema, path, types);
    if (types.empty()) {
      if (schema.contains("properties") || schema.contains("required") || schema.contains("additionalProperties")) {
        types = {"object"};
      } else if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems")) {
        types = {"array"};
      } else if (schema.contains("minLength") || schema.contains("maxLength")) {
        types = {"string"};
      } else {
        return any();
      }
    }
    if (types.size() == 1) return compile_type(schema, path, types[0]);
    const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
    GrammarNode u;
    u.kind = Kind::kUnion;
    std::vector<std::string> seen;
    for (const std::string& type : types) {
      if (std::find(seen.begin(), seen.end(), type) != seen.end()) continue;
      if (type == "integer" && has_number) continue;  // the number grammar covers integers
      seen.push_back(type);
      auto alt = compile_type(schema, path, type);
      if (!alt) return alt.error();
      u.alternatives.push_back(*alt);
    }
    return add(std::move(u));
  }

 private:
  // enum/const as literals. Linear in the values: distinct texts are found with a hash set, and the walk stops at
  // the first distinct value past the limit (an enum of 600k values is refused after 65 of them, not sorted out).
  Result<int32_t> compile_literals(const json& schema, const SchemaPath& path, const std::vector<std::string>& types) {
    std::vector<const json*> values;
    if (auto c = schema.find("const"); c != schema.end()) values.push_back(&*c);
    auto e = schema.find("enum");
    if (e != schema.end() && (!e->is_array() || e->empty())) {
      return make_error("'{}.enum' must be a non-empty array", path.str());
    }
    std::vector<std::string> texts;
    std::unordered_set<std::string> seen;
    auto take = [&](const json& v) -> bool {
      const bool typed = types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& t) {
                           return value_has_type(v, t) || (t == "number" && v.is_number());
                         });
      if (!typed) return true;
      std::string text = syntax == GrammarSyntax::kGemma4 ? gemma4_text(v) : v.dump();
      if (!seen.insert(text).second) return true;
      texts.push_back(std::move(text));
      return texts.size() <= kMaxGrammarAlternatives;
    };
    bool within = std::all_of(values.begin(), values.end(), [&](const json* v) { return take(*v); });
    if (within && e != schema.end()) within = std::all_of(e->begin(), e->end(), take);
    if (!within) {
      return make_error("'{}.enum' has more than {} distinct values; at most {} are supported", path.str(),
                        kMaxGrammarAlternatives, kMaxGrammarAlternatives);
    }
    if (texts.empty()) return make_error("'{}': no value of enum/const has the schema's type", path.str());
    return literals(std::move(texts));
  }

  static Result<int32_t> read_count(const json& schema, const char* key, const SchemaPath& path, int32_t fallback) {
    auto it = schema.find(key);
    if (it == schema.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1'000'000) {
      return make_error("'{}.{}' must be an integer in [0, 1000000]", path.str(), key);
    }
    return static_cast<int32_t>(it->get<int64_t>());
  }

  Result<int32_t> compile_type(const json& schema, const SchemaPath& path, const std::string& type) {
    if (type == "object") return compile_object(schema, path);
    if (type == "array") return compile_array(schema, path);
    if (type == "string") {
      auto lo = read_count(schema, "minLength", path, 0);
      if (!lo) return lo.error();
      auto hi = read_count(schema, "maxLength", path, -1);
      if (!hi) return hi.error();
      if (*hi >= 0 && *hi < *lo) return make_error("'{}': maxLength {} is below minLength {}", path.str(), *hi, *lo);
      GrammarNode n;
      n.kind = Kind::kString;
      n.min_len = *lo;
      n.max_len = *hi;
      return add(std::move(n));
    }
    if (type == "number") return simple(Kind::kNumber);
    if (type == "integer") return simple(Kind::kInteger);
    if (type == "boolean") return literals({"true", "false"});
    return literals({"null"});
  }

  Result<int32_t> compile_object(const json& schema, const SchemaPath& path) {
    GrammarNode n;
    n.kind = Kind::kObject;
    bool additional = true;
    if (auto a = schema.find("additionalProperties"); a != schema.end()) {
      if (!a->is_boolean()) {
        return make_error("'{}.additionalProperties' as a schema is not supported; use true or false", path.str());
      }
      additional = a->get<bool>();
    }
    std::vector<std::string> names;
    if (auto p = schema.find("properties"); p != schema.end()) {
      if (!p->is_object()) return make_error("'{}.properties' must be an object", path.str());
      if (p->size() > kMaxGrammarAlternatives) {
        return make_error("'{}.properties' has {} properties; at most {} are supported", path.str(), p->size(),
                          kMaxGrammarAlternatives);
      }
      for (const auto& [name, sub] : p->items()) {
        auto child = compile(sub, SchemaPath{&path, ".properties.", name});
        if (!child) return child.error();
        names.push_back(name);
        if (syntax == GrammarSyntax::kGemma4) {
          if (!gemma4_bare_key(name)) {
            return make_error("'{}.properties' name {} cannot be written in Gemma 4's call syntax", path.str(),
                              json(name).dump());
          }
          n.keys.push_back(name + ":");
          n.key_nodes.push_back(*child);
          continue;
        }
        n.keys.push_back(json(name).dump());
        n.key_nodes.push_back(*child);
      }
    }
    if (auto r = schema.find("required"); r != schema.end()) {
      if (!r->is_array()) return make_error("'{}.required' must be an array of strings", path.str());
      for (const json& name : *r) {
        auto at = name.is_string() ? std::find(names.begin(), names.end(), name.get<std::string>()) : names.end();
        if (at == names.end()) {
          return make_error("'{}.required' names {}, which is not in properties", path.str(), name.dump());
        }
        n.required |= uint64_t{1} << (at - names.begin());
      }
    }
    if (names.empty() && additional) {
      n.free_keys = true;
      n.free_key = simple(Kind::kString);
      n.free_value = any();
    }
    return add(std::move(n));
  }

  Result<int32_t> compile_array(const json& schema, const SchemaPath& path) {
    GrammarNode n;
    n.kind = Kind::kArray;
    if (auto it = schema.find("items"); it != schema.end()) {
      auto child = compile(*it, SchemaPath{&path, ".items", {}});
      if (!child) return child.error();
      n.items = *child;
    } else {
      n.items = any();
    }
    auto lo = read_count(schema, "minItems", path, 0);
    if (!lo) return lo.error();
    auto hi = read_count(schema, "maxItems", path, -1);
    if (!hi) return hi.error();
    if (*hi >= 0 && *hi < *lo) return make_error("'{}': maxItems {} is below minItems {}", path.str(), *hi, *lo);
    n.min_items = *lo;
    n.max_items = *hi;
    return add(std::move(n));
  }

  int32_t any_ = -1;
};

Result<Grammar> Grammar::from_json_schema(const nlohmann::json& schema) {
  GrammarCompiler c;
  auto root = c.compile(schema, SchemaPath{nullptr, "schema", {}});
  if (!root) return root.error();
  c.g.root_ = *root;
  if (c.g.nodes_.size() > UINT16_MAX) return make_error("the schema is too large ({} nodes)", c.g.nodes_.size());
  c.g.finalize();
  return std::move(c.g);
}

Grammar Grammar::any_json_object() {
  GrammarCompiler c;
  GrammarNode obj;
  obj.kind = Kind::kObject;
  obj.free_keys = true;
  obj.free_key = c.simple(Kind::kString);
  obj.free_value = c.any();
  c.g.root_ = c.add(std::move(obj));
  c.g.finalize();
  return std::move(c.g);
}

Result<Grammar> Grammar::branches(const std::vector<Branch>& branches, GrammarSyntax syntax) {
  HEARTH_CHECK(!branches.empty() && branches.size() <= kMaxGrammarAlternatives, "{} grammar branches", branches.size());
  GrammarCompiler c;
  c.syntax = syntax;
  c.g.syntax_ = syntax;
  GrammarNode n;
  n.kind = Kind::kBranches;
  for (size_t i = 0; i < branches.size(); ++i) {
    HEARTH_CHECK(!branches[i].suffix.empty(), "a grammar branch needs a suffix");
    const std::string root = fmt::format("tools[{}].function.parameters", i);
    auto child = c.compile(branches[i].parameters, SchemaPath{nullptr, root, {}});
    if (!child) return child.error();
    n.prefixes.push_back(branches[i].prefix);
    n.branch_nodes.push_back(*child);
    n.suffixes.push_back(branches[i].suffix);
  }
  c.g.root_ = c.add(std::move(n));
  if (c.g.nodes_.size() > UINT16_MAX) return make_error("the tools are too large ({} nodes)", c.g.nodes_.size());
  c.g.finalize();
  return std::move(c.g);
}

}  // namespace hearth
