// Grammar compilation: a JSON schema (the subset grammar.h lists), any JSON object, or tool-call branches, to the
// node graph grammar.cpp runs.

#include <algorithm>
#include <unordered_set>

#include "grammar/grammar_compiler.h"

namespace hearth {

namespace {

using nlohmann::json;
using Kind = GrammarNodeKind;

const char* const kAnnotations[] = {"title",    "description", "default",     "examples",   "$schema",  "$id",
                                    "$comment", "$defs",       "definitions", "deprecated", "readOnly", "writeOnly"};
constexpr size_t kNumSchemaTypes = 7;  // object array string number integer boolean null
constexpr size_t kMaxGrammarNodes = UINT16_MAX;

const char* const kKeywords[] = {"type",
                                 "properties",
                                 "required",
                                 "additionalProperties",
                                 "items",
                                 "minItems",
                                 "maxItems",
                                 "enum",
                                 "const",
                                 "minLength",
                                 "maxLength",
                                 "pattern",
                                 "format",
                                 "minimum",
                                 "maximum",
                                 "exclusiveMinimum",
                                 "exclusiveMaximum",
                                 "multipleOf",
                                 "anyOf",
                                 "oneOf",
                                 "allOf",
                                 "$ref",
                                 "nullable",
                                 "propertyNames"};
constexpr std::string_view kSupported =
    "type, properties, required, additionalProperties, propertyNames, items, minItems, maxItems, enum, const, "
    "minLength, maxLength, pattern, format, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, anyOf, "
    "oneOf, allOf (one schema), $ref, $defs, nullable";

bool is_in(const char* const* begin, const char* const* end, std::string_view key) {
  return std::find(begin, end, key) != end;
}

bool is_annotation(std::string_view key) {
  return is_in(std::begin(kAnnotations), std::end(kAnnotations), key);
}

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

// The first keyword of `schema` that is neither an annotation nor one of `allowed`, or empty.
std::string_view other_keyword(const json& schema, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : schema.items()) {
    if (is_annotation(key) || std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    return key;
  }
  return {};
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

Result<int32_t> read_count(const json& schema, const char* key, const SchemaPath& path, int32_t fallback) {
  auto it = schema.find(key);
  if (it == schema.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1'000'000) {
    return make_error("'{}.{}' must be an integer in [0, 1000000]", path.str(), key);
  }
  return static_cast<int32_t>(it->get<int64_t>());
}

int32_t GrammarCompiler::add(GrammarNode node) {
  g.nodes_.push_back(std::move(node));
  return static_cast<int32_t>(g.nodes_.size() - 1);
}

int32_t GrammarCompiler::literals(std::vector<std::string> values) {
  GrammarNode n;
  n.kind = Kind::kLiterals;
  n.literals = std::move(values);
  return add(std::move(n));
}

int32_t GrammarCompiler::simple(Kind kind) {
  GrammarNode n;
  n.kind = kind;
  return add(std::move(n));
}

int32_t GrammarCompiler::any() {
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

int32_t GrammarCompiler::union_of(std::vector<int32_t> alternatives) {
  std::erase(alternatives, kNeverNode);
  if (alternatives.empty()) return kNeverNode;
  if (alternatives.size() == 1) return alternatives[0];
  GrammarNode u;
  u.kind = Kind::kUnion;
  u.alternatives = std::move(alternatives);
  return add(std::move(u));
}

Result<int32_t> GrammarCompiler::compile(const json& schema, const SchemaPath& path) {
  // Nodes grow at most linearly with the schema, but a budget names the limit before the graph outgrows the
  // 16-bit node ids of GrammarFrame; the visit budget bounds what a recursive $ref can fan out to.
  if (g.nodes_.size() >= kMaxGrammarNodes) {
    return make_error("the schema at '{}' is too large: at most {} grammar nodes are supported", path.str(),
                      kMaxGrammarNodes);
  }
  if (++calls_ > kMaxCompileCalls) {
    return make_error(
        "the schema at '{}' is too large: at most {} schema visits are supported (a $ref is expanded "
        "where it is used)",
        path.str(), kMaxCompileCalls);
  }
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return any();
    return make_error("the schema at '{}' is false: nothing can match it", path.str());
  }
  if (!schema.is_object()) return make_error("the schema at '{}' must be an object", path.str());
  for (const auto& [key, value] : schema.items()) {
    if (!is_in(std::begin(kKeywords), std::end(kKeywords), key) && !is_annotation(key)) {
      return make_error("JSON Schema keyword '{}' (at '{}') is not supported; supported: {}", key, path.str(),
                        kSupported);
    }
  }
  if (auto n = schema.find("nullable"); n != schema.end()) {
    if (!n->is_boolean()) return make_error("'{}.nullable' must be true or false", path.str());
    if (n->get<bool>()) {  // OpenAPI's nullable: the schema or null
      json rest = schema;
      rest.erase("nullable");
      auto inner = compile(rest, path);
      if (!inner) return inner;
      if (*inner == kNeverNode) return literals({"null"});
      return union_of({*inner, literals({"null"})});
    }
  }
  if (schema.contains("$ref")) return compile_ref(schema, path);
  if (schema.contains("anyOf") || schema.contains("oneOf") || schema.contains("allOf")) {
    return compile_alternatives(schema, path);
  }
  return compile_keywords(schema, path);
}

Result<int32_t> GrammarCompiler::compile_ref(const json& schema, const SchemaPath& path) {
  if (std::string_view other = other_keyword(schema, {"$ref", "nullable"}); !other.empty()) {
    return make_error("'{}': '{}' beside '$ref' is not supported", path.str(), other);
  }
  const json& ref = schema["$ref"];
  if (!ref.is_string()) return make_error("'{}.$ref' must be a string", path.str());
  const std::string& text = ref.get_ref<const std::string&>();
  const json* target = nullptr;
  if (text == "#") {
    target = root;
  } else if (text.starts_with("#/")) {
    // A JSON pointer into this document (#/$defs/Name, #/definitions/Name, #/properties/...). nlohmann reports a
    // malformed pointer by exception; it stays inside this function.
    try {
      const json::json_pointer pointer(text.substr(1));
      if (root->contains(pointer)) target = &root->at(pointer);
    } catch (const json::exception&) {
      target = nullptr;
    }
  } else {
    return make_error("'{}.$ref' \"{}\" is not supported: only references into this schema (\"#\", \"#/$defs/...\")",
                      path.str(), text);
  }
  if (target == nullptr) return make_error("'{}.$ref' \"{}\" points at nothing in the schema", path.str(), text);
  int32_t& depth = expanding_[target];
  if (depth >= kMaxRefDepth) return kNeverNode;  // recursion bounded: this branch cannot be taken deeper
  ++depth;
  auto node = compile(*target, SchemaPath{&path, ".$ref:", text});
  --expanding_[target];
  return node;
}

Result<int32_t> GrammarCompiler::compile_alternatives(const json& schema, const SchemaPath& path) {
  const char* key = schema.contains("anyOf") ? "anyOf" : schema.contains("oneOf") ? "oneOf" : "allOf";
  if (std::string_view other = other_keyword(schema, {key}); !other.empty()) {
    return make_error("'{}': '{}' beside '{}' is not supported", path.str(), other, key);
  }
  const json& list = schema[key];
  if (!list.is_array() || list.empty()) return make_error("'{}.{}' must be a non-empty array", path.str(), key);
  if (std::string_view(key) == "allOf") {
    if (list.size() != 1) return make_error("'{}.allOf' of more than one schema is not supported", path.str());
    return compile(list[0], SchemaPath{&path, ".allOf[0]", {}});
  }
  if (list.size() > kMaxGrammarAlternatives) {
    return make_error("'{}.{}' has {} schemas; at most {} are supported", path.str(), key, list.size(),
                      kMaxGrammarAlternatives);
  }
  std::vector<int32_t> alternatives;
  std::vector<std::string> names(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    names[i] = fmt::format(".{}[{}]", key, i);
    auto alt = compile(list[i], SchemaPath{&path, names[i], {}});
    if (!alt) return alt;
    alternatives.push_back(*alt);
  }
  return union_of(std::move(alternatives));
}

Result<int32_t> GrammarCompiler::compile_keywords(const json& schema, const SchemaPath& path) {
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
    auto has_any = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return schema.contains(k); });
    };
    if (has_any({"properties", "required", "additionalProperties", "propertyNames"})) {
      types = {"object"};
    } else if (has_any({"items", "minItems", "maxItems"})) {
      types = {"array"};
    } else if (has_any({"minLength", "maxLength", "pattern", "format"})) {
      types = {"string"};
    } else if (has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) {
      types = {"number"};
    } else {
      return any();
    }
  }
  if (types.size() == 1) return compile_type(schema, path, types[0]);
  const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
  std::vector<int32_t> alternatives;
  for (const std::string& type : types) {
    if (type == "integer" && has_number) continue;  // the number grammar covers integers
    auto alt = compile_type(schema, path, type);
    if (!alt) return alt.error();
    alternatives.push_back(*alt);
  }
  return union_of(std::move(alternatives));
}

// enum/const as literals. Linear in the values: distinct texts are found with a hash set, and the walk stops at
// the first distinct value past the limit (an enum of 600k values is refused after 65 of them, not sorted out).
Result<int32_t> GrammarCompiler::compile_literals(const json& schema, const SchemaPath& path,
                                                  const std::vector<std::string>& types) {
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

Result<int32_t> GrammarCompiler::compile_type(const json& schema, const SchemaPath& path, const std::string& type) {
  if (type == "object") return compile_object(schema, path);
  if (type == "array") return compile_array(schema, path);
  if (type == "string") return compile_string(schema, path);
  if (type == "number") return compile_number(schema, path);
  if (type == "integer") return compile_integer(schema, path);
  if (type == "boolean") return literals({"true", "false"});
  return literals({"null"});
}

std::string GrammarCompiler::key_text(const std::string& name) const {
  return syntax == GrammarSyntax::kGemma4 ? name + ":" : json(name).dump();
}

Result<int32_t> GrammarCompiler::compile_object(const json& schema, const SchemaPath& path) {
  GrammarNode n;
  n.kind = Kind::kObject;
  int32_t additional = any();  // the value node of keys outside properties; kNeverNode: none
  if (auto a = schema.find("additionalProperties"); a != schema.end()) {
    if (a->is_boolean()) {
      additional = a->get<bool>() ? any() : kNeverNode;
    } else {
      auto value = compile(*a, SchemaPath{&path, ".additionalProperties", {}});
      if (!value) return value;
      additional = *value;
    }
  }
  std::vector<std::string> names;
  std::vector<uint8_t> never;
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
      never.push_back(*child == kNeverNode ? 1 : 0);
      if (*child == kNeverNode) continue;  // at the recursion bound: left out (refused below when required)
      if (syntax == GrammarSyntax::kGemma4 && !gemma4_bare_key(name)) {
        return make_error("'{}.properties' name {} cannot be written in Gemma 4's call syntax", path.str(),
                          json(name).dump());
      }
      n.keys.push_back(key_text(name));
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
      if (never[at - names.begin()] != 0) return kNeverNode;
      const auto index = std::find(n.keys.begin(), n.keys.end(), key_text(*at)) - n.keys.begin();
      n.required |= uint64_t{1} << index;
    }
  }
  if (auto k = schema.find("propertyNames"); k != schema.end() && *k != json{{"type", "string"}}) {
    if (!names.empty()) return make_error("'{}.propertyNames' beside properties is not supported", path.str());
    auto key = compile(*k, SchemaPath{&path, ".propertyNames", {}});
    if (!key) return key;
    if (*key == kNeverNode || (g.nodes_[*key].kind != Kind::kString && g.nodes_[*key].kind != Kind::kDfa)) {
      return make_error("'{}.propertyNames' must be a schema of strings", path.str());
    }
    n.free_key = *key;
  }
  // With properties listed, only they are produced (additional ones are optional, so this stays valid).
  if (names.empty() && additional != kNeverNode) {
    n.free_keys = true;
    if (n.free_key < 0) n.free_key = simple(Kind::kString);
    n.free_value = additional;
  }
  return add(std::move(n));
}

Result<int32_t> GrammarCompiler::compile_array(const json& schema, const SchemaPath& path) {
  GrammarNode n;
  n.kind = Kind::kArray;
  auto lo = read_count(schema, "minItems", path, 0);
  if (!lo) return lo.error();
  auto hi = read_count(schema, "maxItems", path, -1);
  if (!hi) return hi.error();
  if (*hi >= 0 && *hi < *lo) return make_error("'{}': maxItems {} is below minItems {}", path.str(), *hi, *lo);
  n.min_items = *lo;
  n.max_items = *hi;
  if (auto it = schema.find("items"); it != schema.end()) {
    auto child = compile(*it, SchemaPath{&path, ".items", {}});
    if (!child) return child.error();
    n.items = *child;
    if (*child == kNeverNode) {  // at the recursion bound: only the empty array
      if (n.min_items > 0) return kNeverNode;
      n.items = any();
      n.max_items = 0;
    }
  } else {
    n.items = any();
  }
  return add(std::move(n));
}

namespace {

Error never_error(std::string_view where) {
  return make_error("'{}' cannot be satisfied within {} expansions of a recursive $ref", where, kMaxRefDepth);
}

}  // namespace

Result<Grammar> Grammar::from_json_schema(const nlohmann::json& schema) {
  GrammarCompiler c;
  c.root = &schema;
  auto root = c.compile(schema, SchemaPath{nullptr, "schema", {}});
  if (!root) return root.error();
  if (*root == kNeverNode) return never_error("schema");
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
    c.root = &branches[i].parameters;
    auto child = c.compile(branches[i].parameters, SchemaPath{nullptr, root, {}});
    if (!child) return child.error();
    if (*child == kNeverNode) return never_error(root);
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
