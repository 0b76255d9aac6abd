#pragma once
// Grammar: the byte-level automaton behind constrained decoding (response_format json_object / json_schema, and a
// forced tool call). A Grammar is an immutable graph of nodes compiled from a JSON schema (or built for any JSON
// object, or for a tool call in a chat template's format); a GrammarState is one position in it: up to
// kMaxGrammarPaths small stacks of frames (one per live reading of an anyOf), cheap to copy, advanced one byte at a
// time. token_mask.h turns a state into the set of tokens whose bytes
// keep the output a valid prefix.
//
// The language is compact JSON: no whitespace outside strings (so a weak model cannot loop on spaces), strings
// without \u escapes (raw UTF-8 instead, so no lone surrogate can be produced), integers and fractions of at most
// 15 digits, exponents of at most 2 digits (so every number fits a double), nesting at most kMaxGrammarDepth
// frames. Every string of the language validates against the schema it came from (oneOf: when its alternatives are
// disjoint).
//
// Gemma 4's call syntax (GrammarSyntax::kGemma4, for a forced Gemma 4 tool call; server/api/gemma4_answer.h): the
// same values with strings between <|"|> and <|"|> (no escapes; their text may hold '<' but not "<|", so the first
// "<|" ends them; newlines and tabs are text), the listed keys of an object bare (key:value), free keys quoted like
// strings. Each reading (GrammarStack) follows these rules on its own, so anyOf, $ref and bounds work as in JSON.
// Its strings never take token_mask.h's plain-text fast path. pattern and format (string automata, which spell
// JSON's '"' quotes) are refused in this syntax: an Error naming the keyword and its path, for a 400.
//
// JSON Schema subset (from_json_schema; anything else is an Error naming the keyword and its path, for a 400;
// docs/serving.md has the table):
//   type (a name or an array of names), properties, required, additionalProperties (true, false or a schema; with
//   properties present only the listed properties are produced), propertyNames (a string schema, without
//   properties), items, minItems, maxItems, enum, const, minLength, maxLength (code points);
//   pattern: a regex subset compiled to a ByteDfa (byte_dfa.h), matched whole (anchors implied, a subset of the
//   search semantics), never producing what JSON must escape;
//   format: date, time, date-time, uuid, email, ipv4 as automata (subsets of each format; others refused);
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum: integers exact (a digit automaton for [min, max]);
//   numbers approximated from inside: integers in range and fractions i.f (no exponent) whose interval (i, i+1)
//   lies in range; all within +-(10^15 - 1);
//   multipleOf: whole divisors 1..1000, exact (on a number it produces integers);
//   anyOf, oneOf (as anyOf: valid when the alternatives are disjoint), allOf of one schema, nullable;
//   $ref into the same document ($defs, definitions, any JSON pointer, "#"), expanded where used, a recursive one
//   at most kMaxRefDepth times inside itself (past it the branch is not produced; a schema that needs it is an
//   Error); annotations title, description, default, examples, deprecated, readOnly, writeOnly, $schema, $id,
//   $comment.
// An object schema with no properties and additionalProperties not false takes any keys with values of it.

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/byte_dfa.h"
#include "util/result.h"

namespace hearth {

inline constexpr int32_t kMaxGrammarDepth = 32;        // frames: nesting of objects, arrays and their values
inline constexpr size_t kMaxGrammarAlternatives = 64;  // properties of an object, values of an enum, tools
inline constexpr int32_t kMaxGrammarPaths = 8;         // readings of the output followed at once (anyOf)
inline constexpr int32_t kMaxRefDepth = 6;             // expansions of one $ref inside itself (recursion bound)

enum class GrammarSyntax : uint8_t { kJson, kGemma4 };

enum class GrammarNodeKind : uint8_t {
  kObject,    // {"key":value,...}: listed keys (each at most once), or free keys when free_keys
  kArray,     // [item,...] with min_items..max_items
  kString,    // "..." with min_len..max_len code points
  kNumber,    // -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
  kInteger,   // -?(0|[1-9]d*)
  kLiterals,  // one of `literals` (serialized JSON: enum, const, true/false, null)
  kUnion,     // one of `alternatives`, told apart by their first byte (a "type" array, or any JSON value)
  kBranches,  // one of: prefixes[i], then node branch_nodes[i], then suffixes[i] (a tool call)
  kDfa,       // the bytes ByteDfa dfas()[dfa] accepts (pattern, format, bounded or multipleOf integers)
};

struct GrammarNode {
  GrammarNodeKind kind = GrammarNodeKind::kLiterals;
  // kObject: serialized keys with their quotes ("\"city\""), the node of each key's value, the required keys.
  std::vector<std::string> keys;
  std::vector<int32_t> key_nodes;
  uint64_t required = 0;
  bool free_keys = false;  // any string key (node free_key, a kString), values `free_value`
  int32_t free_key = -1;
  int32_t free_value = -1;
  // kArray
  int32_t items = -1;
  int32_t min_items = 0;
  int32_t max_items = -1;  // -1: unbounded
  // kString
  int32_t min_len = 0;
  int32_t max_len = -1;  // -1: unbounded
  // kLiterals; kBranches uses prefixes, branch_nodes, suffixes
  std::vector<std::string> literals;
  std::vector<std::string> prefixes;
  std::vector<int32_t> branch_nodes;
  std::vector<std::string> suffixes;
  // kUnion
  std::vector<int32_t> alternatives;
  // kDfa
  int32_t dfa = -1;
};

// One frame of a GrammarState: a node and where in it the output is.
struct GrammarFrame {
  uint16_t node = 0;
  uint8_t phase = 0;
  uint8_t extra = 0;  // string: UTF-8 continuation bytes pending; object/branches: the chosen key/branch
  uint16_t pos = 0;   // byte position in a key/literal/prefix/suffix; digits of a number part
  int32_t count = 0;  // string: code points; array: items; kDfa: the automaton's state
  uint64_t seen = 0;  // object: keys produced; string: the UTF-8 lead byte pending
  uint64_t cand = 0;  // key/literal/branch candidates still matching
};

// One reading of the output so far: a stack of frames.
struct GrammarStack {
  int32_t depth = 0;
  std::array<GrammarFrame, kMaxGrammarDepth> frames;

  void copy_from(const GrammarStack& other) {
    depth = other.depth;
    for (int32_t i = 0; i < depth; ++i) frames[i] = other.frames[i];
  }
};

// A position in a Grammar: every reading of the output still alive (anyOf alternatives that begin alike, e.g. two
// objects, are followed side by side until the bytes tell them apart). At most kMaxGrammarPaths; an alternative
// that would need one more is not followed (the output stays valid, it just cannot take that alternative there).
// Copying costs the active frames only (copy_from).
struct GrammarState {
  int32_t num_paths = 0;
  std::array<GrammarStack, kMaxGrammarPaths> paths;

  void copy_from(const GrammarState& other) {
    num_paths = other.num_paths;
    for (int32_t i = 0; i < num_paths; ++i) paths[i].copy_from(other.paths[i]);
  }
};

class Grammar {
 public:
  // Compiles a JSON schema (the subset above). Fails naming the keyword (and its path) it does not support.
  [[nodiscard]] static Result<Grammar> from_json_schema(const nlohmann::json& schema);
  // Any JSON object (response_format json_object).
  [[nodiscard]] static Grammar any_json_object();
  // One tool call: for each tool, `prefix`, then JSON that `parameters` (a schema) accepts, then `suffix`. Fails
  // naming the tool whose parameters use something unsupported. Requires 1..kMaxGrammarAlternatives tools.
  struct Branch {
    std::string prefix;
    nlohmann::json parameters;
    std::string suffix;
  };
  [[nodiscard]] static Result<Grammar> branches(const std::vector<Branch>& branches,
                                                GrammarSyntax syntax = GrammarSyntax::kJson);

  // The state before any output.
  [[nodiscard]] GrammarState start() const;
  // Feeds one byte to `state`. Returns false when the byte cannot extend a valid prefix; `state` is then garbage
  // (callers advance a copy).
  [[nodiscard]] bool advance(GrammarState& state, uint8_t byte) const;
  [[nodiscard]] bool advance(GrammarState& state, std::string_view bytes) const;
  // The output so far is a whole string of the language (it may still grow: a top-level number).
  [[nodiscard]] bool can_end(const GrammarState& state) const;
  // The output is whole and nothing can follow it (on some reading).
  [[nodiscard]] static bool is_terminal(const GrammarState& state) {
    for (int32_t i = 0; i < state.num_paths; ++i) {
      if (state.paths[i].depth == 0) return true;
    }
    return false;
  }
  // The top frame is inside a string's text with nothing pending: every "plain" byte sequence (no quote,
  // backslash or control character; whole UTF-8 characters) of at most `*room` code points extends it
  // (*room = -1: unbounded). token_mask.h's fast path.
  [[nodiscard]] bool in_plain_string(const GrammarState& state, int32_t* room) const;
  // A short way to finish: bytes that take `state` to a whole output (is_terminal, or can_end for a top-level
  // number), found greedily (each step takes the first byte, in an order that closes strings, objects and arrays
  // first, that the grammar accepts). Empty when the output may already end; nullopt when none is found within
  // `max_bytes`. Deterministic: from the state after a prefix of the result, the rest of it is the result. The
  // engine's wrap-up near max_tokens (output_processor.h) follows it so a constrained output still ends whole.
  [[nodiscard]] std::optional<std::string> quick_completion(const GrammarState& state, size_t max_bytes) const;

  const std::vector<GrammarNode>& nodes() const { return nodes_; }
  const std::vector<ByteDfa>& dfas() const { return dfas_; }
  GrammarSyntax syntax() const { return syntax_; }

 private:
  enum class Step { kConsumed, kRejected, kPopRetry };
  // Feeds `byte` to path `i` of `state`; a union whose alternatives both take the byte forks new paths at the end.
  bool advance_path(GrammarState& state, int32_t i, uint8_t byte) const;
  Step step(GrammarStack& stack, uint8_t byte) const;
  Step step_string(GrammarStack& stack, GrammarFrame& frame, const GrammarNode& node, uint8_t byte) const;
  Step step_gemma4_string(GrammarStack& stack, GrammarFrame& frame, const GrammarNode& node, uint8_t byte) const;
  Step step_utf8(GrammarFrame& frame, uint8_t byte) const;
  Step step_number(GrammarStack& stack, GrammarFrame& frame, bool integer, uint8_t byte) const;
  bool can_end(const GrammarStack& stack) const;
  bool push(GrammarStack& stack, int32_t node) const;
  // The byte of the shortest way on from a kDfa top frame of path 0 that `state` accepts, or -1.
  int32_t dfa_shortcut(const GrammarState& state) const;
  // The bytes that end the Gemma 4 string on top of path 0 of `state` soonest ("a" while it is short of its
  // minLength); empty when that top is no such string, or one inside a UTF-8 character.
  std::string_view gemma4_string_closer(const GrammarState& state) const;
  bool starts_with_byte(int32_t node, uint8_t byte) const { return (first_bytes_[node][byte >> 6] >> (byte & 63)) & 1; }
  // Fills first_bytes_ once the nodes are complete.
  void finalize();

  std::vector<GrammarNode> nodes_;
  std::vector<ByteDfa> dfas_;
  std::vector<std::array<uint64_t, 4>> first_bytes_;  // per node: the bytes a value of it may start with
  int32_t root_ = 0;
  GrammarSyntax syntax_ = GrammarSyntax::kJson;

  friend class GrammarCompiler;
};

}  // namespace hearth
