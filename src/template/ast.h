#pragma once
// Syntax tree of a parsed chat template. Nodes are immutable once parsed and shared by every render.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/lexer.h"
#include "template/value.h"

namespace hearth::tmpl {

enum class ExprKind {
  literal,      // literal
  name,         // name
  list,         // args: items
  tuple,        // args: items
  dict,         // args: key0, value0, key1, value1, ...
  get_attr,     // args[0].name
  get_item,     // args[0][args[1]]
  slice,        // args[0][args[1]:args[2]:args[3]] (null ExprPtr = omitted)
  call,         // args[0](args[1..], kwargs)
  filter,       // args[0] | name(args[1..], kwargs)
  test,         // args[0] is [not] name(args[1..])
  unary,        // name ("not", "-", "+") args[0]
  binary,       // args[0] name args[1]
  conditional,  // args[0] if args[1] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::literal;
  SourcePos pos;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // `is not`
  int depth = 1;         // height of this subtree, bounded by the parser
};

enum class StmtKind { text, output, if_, for_, set, set_block, macro, break_, continue_, body };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: no default (undefined when not passed)
};

struct Stmt {
  StmtKind kind = StmtKind::text;
  SourcePos pos;
  std::string text;                  // text: the literal text; macro: its name
  ExprPtr expr;                      // output / set value / for iterable
  ExprPtr condition;                 // for: the inline `if` filter
  std::vector<ExprPtr> conditions;   // if: one per branch (if, elif...)
  std::vector<Body> bodies;          // if: one per branch, plus else when present; for/macro/set_block/body: [0]
  Body else_body;                    // for-else
  std::vector<std::string> targets;  // for/set: names bound (tuple unpacking when >1)
  std::string target_attr;           // set ns.attr: targets[0] is ns, target_attr is attr
  std::vector<MacroParam> params;    // macro
};

struct Program {
  Body body;
};

}  // namespace hearth::tmpl
