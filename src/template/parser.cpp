#include "template/parser.h"

#include <algorithm>
#include <initializer_list>

#include "template/interpreter.h"

namespace hearth::tmpl {
namespace {

// Nesting deeper than this (blocks or expressions) is rejected, so hostile templates cannot exhaust the stack.
constexpr int kMaxNesting = 100;
// Expression trees taller than this (long operator, attribute or filter chains) are rejected too: evaluating and
// destroying them recurses once per level.
constexpr int kMaxExprHeight = 300;

bool is_keyword(const std::string& s) {
  static constexpr std::string_view kKeywords[] = {"and", "or", "not", "in", "is", "if", "else"};
  for (std::string_view k : kKeywords) {
    if (s == k) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Program run() {
    Program program;
    std::string end = parse_body(program.body, {});
    if (!end.empty()) fail(peek(), "unexpected '{% " + end + " %}'");
    return program;
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  [[noreturn]] void fail(const Token& t, const std::string& message) const {
    throw_error(to_string(t.pos) + ": " + message);
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::op && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::name && peek(ahead).text == name;
  }
  bool accept_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail(peek(), "expected '" + std::string(op) + "', found " + describe(peek()));
  }
  std::string expect_identifier() {
    if (peek().type != TokenType::name || is_keyword(peek().text)) {
      fail(peek(), "expected a name, found " + describe(peek()));
    }
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != TokenType::block_end) fail(peek(), "expected '%}', found " + describe(peek()));
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::eof:
        return "end of template";
      case TokenType::text:
        return "text";
      case TokenType::var_end:
        return "'}}'";
      case TokenType::block_end:
        return "'%}'";
      case TokenType::string:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }

  struct DepthGuard {
    DepthGuard(Parser& p, const Token& at) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.fail(at, "template nests deeper than the limit");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // ---- statements ----
  // Parses statements until a block tag whose keyword is in `ends` (returned, with the tag's '{%' and keyword
  // consumed) or end of input (returns "").
  std::string parse_body(Body& body, std::initializer_list<std::string_view> ends) {
    while (true) {
      const Token& t = peek();
      if (t.type == TokenType::eof) {
        if (ends.size() != 0) fail(t, "missing '{% " + std::string(*ends.begin()) + " %}' before end of template");
        return "";
      }
      if (t.type == TokenType::text) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = StmtKind::text;
        stmt->pos = t.pos;
        stmt->text = next().text;
        body.push_back(std::move(stmt));
      } else if (t.type == TokenType::var_begin) {
        next();
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = StmtKind::output;
        stmt->pos = t.pos;
        stmt->expr = parse_expression();
        if (peek().type != TokenType::var_end) fail(peek(), "expected '}}', found " + describe(peek()));
        next();
        body.push_back(std::move(stmt));
      } else if (t.type == TokenType::block_begin) {
        const Token& keyword = peek(1);
        for (std::string_view end : ends) {
          if (keyword.type == TokenType::name && keyword.text == end) {
            next();
            return next().text;
          }
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail(t, "unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    const Token& keyword = peek();
    DepthGuard guard(*this, keyword);
    if (keyword.type != TokenType::name) fail(keyword, "expected a statement keyword, found " + describe(keyword));
    const std::string& k = keyword.text;
    if (k == "if") return parse_if();
    if (k == "for") return parse_for();
    if (k == "set") return parse_set();
    if (k == "macro") return parse_macro();
    if (k == "break" || k == "continue") {
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = k == "break" ? StmtKind::break_ : StmtKind::continue_;
      stmt->pos = next().pos;
      expect_block_end();
      return stmt;
    }
    if (k == "generation") {  // HF's assistant-mask marker: renders its body unchanged
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = StmtKind::body;
      stmt->pos = next().pos;
      expect_block_end();
      stmt->bodies.emplace_back();
      parse_body(stmt->bodies[0], {"endgeneration"});
      expect_block_end();
      return stmt;
    }
    static constexpr std::string_view kKnown[] = {"call",  "filter", "include", "import",     "from", "extends",
                                                  "block", "with",   "raw",     "autoescape", "do"};
    for (std::string_view known : kKnown) {
      if (k == known) fail(keyword, "unsupported template construct '{% " + k + " %}'");
    }
    fail(keyword, "unknown or misplaced statement '{% " + k + " %}'");
  }

  StmtPtr parse_if() {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = StmtKind::if_;
    stmt->pos = next().pos;
    while (true) {
      stmt->conditions.push_back(parse_expression());
      expect_block_end();
      stmt->bodies.emplace_back();
      const std::string end = parse_body(stmt->bodies.back(), {"elif", "else", "endif"});
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        stmt->bodies.emplace_back();
        parse_body(stmt->bodies.back(), {"endif"});
      }
      expect_block_end();
      return stmt;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    const bool paren = accept_op("(");
    do {
      targets.push_back(expect_identifier());
    } while (accept_op(","));
    if (paren) expect_op(")");
    return targets;
  }

  StmtPtr parse_for() {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = StmtKind::for_;
    stmt->pos = next().pos;
    stmt->targets = parse_targets();
    if (!accept_name("in")) fail(peek(), "expected 'in' in for loop, found " + describe(peek()));
    stmt->expr = parse_or();
    if (accept_name("if")) stmt->condition = parse_or();
    if (is_name("recursive")) fail(peek(), "unsupported template construct 'recursive' loop");
    expect_block_end();
    stmt->bodies.emplace_back();
    const std::string end = parse_body(stmt->bodies[0], {"else", "endfor"});
    if (end == "else") {
      expect_block_end();
      parse_body(stmt->else_body, {"endfor"});
    }
    expect_block_end();
    return stmt;
  }

  StmtPtr parse_set() {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = StmtKind::set;
    stmt->pos = next().pos;
    stmt->targets.push_back(expect_identifier());
    if (accept_op(".")) {
      stmt->target_attr = expect_identifier();
    } else {
      while (accept_op(",")) stmt->targets.push_back(expect_identifier());
    }
    if (peek().type == TokenType::block_end && stmt->targets.size() == 1 && stmt->target_attr.empty()) {
      next();
      stmt->kind = StmtKind::set_block;
      stmt->bodies.emplace_back();
      parse_body(stmt->bodies[0], {"endset"});
      expect_block_end();
      return stmt;
    }
    expect_op("=");
    stmt->expr = parse_tuple_or_expression();
    expect_block_end();
    return stmt;
  }

  StmtPtr parse_macro() {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = StmtKind::macro;
    stmt->pos = next().pos;
    stmt->text = expect_identifier();
    expect_op("(");
    while (!accept_op(")")) {
      MacroParam param;
      param.name = expect_identifier();
      if (accept_op("=")) param.default_value = parse_expression();
      stmt->params.push_back(std::move(param));
      if (!is_op(")")) expect_op(",");
    }
    expect_block_end();
    stmt->bodies.emplace_back();
    parse_body(stmt->bodies[0], {"endmacro"});
    if (peek().type == TokenType::name) next();  // {% endmacro name %}
    expect_block_end();
    return stmt;
  }

  // ---- expressions (Jinja's precedence, loosest first) ----
  ExprPtr make(ExprKind kind, SourcePos pos, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    e->name = std::move(name);
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr lhs, ExprPtr rhs) {
    auto e = make(ExprKind::binary, lhs->pos, std::move(op));
    e->args.push_back(std::move(lhs));
    e->args.push_back(std::move(rhs));
    return finish(std::move(e));
  }

  // Records the height of `e` from its children; fails when it exceeds the limit.
  ExprPtr finish(ExprPtr e) {
    int height = 0;
    for (const ExprPtr& child : e->args) {
      if (child) height = std::max(height, child->depth);
    }
    for (const auto& [name, child] : e->kwargs) height = std::max(height, child->depth);
    e->depth = height + 1;
    if (e->depth > kMaxExprHeight) fail(peek(), "expression nests deeper than the limit");
    return e;
  }

  // `a, b` without parentheses (set right-hand side) makes a tuple.
  ExprPtr parse_tuple_or_expression() {
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    auto tuple = make(ExprKind::tuple, first->pos);
    tuple->args.push_back(std::move(first));
    while (accept_op(",")) tuple->args.push_back(parse_expression());
    return tuple;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this, peek());
    ExprPtr value = parse_or();
    while (is_name("if")) {
      auto cond = make(ExprKind::conditional, next().pos);
      cond->args.push_back(std::move(value));
      cond->args.push_back(parse_or());
      cond->args.push_back(accept_name("else") ? parse_expression() : nullptr);
      value = finish(std::move(cond));
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr lhs = parse_and();
    while (accept_name("or")) lhs = binary("or", std::move(lhs), parse_and());
    return lhs;
  }

  ExprPtr parse_and() {
    ExprPtr lhs = parse_not();
    while (accept_name("and")) lhs = binary("and", std::move(lhs), parse_not());
    return lhs;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this, peek());
      auto e = make(ExprKind::unary, next().pos, "not");
      e->args.push_back(parse_not());
      return finish(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr lhs = parse_math1();
    while (true) {
      static constexpr std::string_view kOps[] = {"==", "!=", "<", "<=", ">", ">="};
      bool matched = false;
      for (std::string_view op : kOps) {
        if (accept_op(op)) {
          lhs = binary(std::string(op), std::move(lhs), parse_math1());
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (accept_name("in")) {
        lhs = binary("in", std::move(lhs), parse_math1());
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        lhs = binary("not in", std::move(lhs), parse_math1());
      } else {
        return lhs;
      }
    }
  }

  ExprPtr parse_math1() {
    ExprPtr lhs = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      lhs = binary(op, std::move(lhs), parse_concat());
    }
    return lhs;
  }

  ExprPtr parse_concat() {
    ExprPtr lhs = parse_math2();
    while (accept_op("~")) lhs = binary("~", std::move(lhs), parse_math2());
    return lhs;
  }

  ExprPtr parse_math2() {
    ExprPtr lhs = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      lhs = binary(op, std::move(lhs), parse_pow());
    }
    return lhs;
  }

  ExprPtr parse_pow() {
    ExprPtr lhs = parse_unary(true);
    while (accept_op("**")) lhs = binary("**", std::move(lhs), parse_unary(true));
    return lhs;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(*this, peek());
      node = make(ExprKind::unary, peek().pos, next().text);
      node->args.push_back(parse_unary(false));
      node = finish(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(Expr& call);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  if (t.type == TokenType::string) {
    auto e = make(ExprKind::literal, t.pos);
    std::string s = next().text;
    while (peek().type == TokenType::string) s += next().text;  // adjacent literals concatenate
    e->literal = Value(std::move(s));
    return e;
  }
  if (t.type == TokenType::integer || t.type == TokenType::floating) {
    auto e = make(ExprKind::literal, t.pos);
    e->literal = t.type == TokenType::integer ? Value(t.int_value) : Value(t.float_value);
    next();
    return e;
  }
  if (t.type == TokenType::name) {
    const std::string& n = t.text;
    auto e = make(ExprKind::literal, t.pos);
    if (n == "true" || n == "True") {
      e->literal = Value(true);
    } else if (n == "false" || n == "False") {
      e->literal = Value(false);
    } else if (n == "none" || n == "None") {
      e->literal = Value::none();
    } else {
      if (is_keyword(n)) fail(t, "unexpected '" + n + "'");
      e = make(ExprKind::name, t.pos, n);
    }
    next();
    return e;
  }
  DepthGuard guard(*this, t);
  if (accept_op("(")) {
    if (accept_op(")")) return make(ExprKind::tuple, t.pos);
    ExprPtr first = parse_expression();
    if (accept_op(")")) return first;
    auto tuple = make(ExprKind::tuple, t.pos);
    tuple->args.push_back(std::move(first));
    while (accept_op(",") && !is_op(")")) tuple->args.push_back(parse_expression());
    expect_op(")");
    return tuple;
  }
  if (accept_op("[")) {
    auto list = make(ExprKind::list, t.pos);
    while (!accept_op("]")) {
      list->args.push_back(parse_expression());
      if (!is_op("]")) expect_op(",");
    }
    return list;
  }
  if (accept_op("{")) {
    auto dict = make(ExprKind::dict, t.pos);
    while (!accept_op("}")) {
      dict->args.push_back(parse_expression());
      expect_op(":");
      dict->args.push_back(parse_expression());
      if (!is_op("}")) expect_op(",");
    }
    return dict;
  }
  fail(t, "expected an expression, found " + describe(t));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".")) {
      const SourcePos pos = next().pos;
      if (peek().type == TokenType::integer) {  // foo.0 means foo[0]
        auto item = make(ExprKind::get_item, pos);
        item->args.push_back(std::move(node));
        auto index = make(ExprKind::literal, pos);
        index->literal = Value(next().int_value);
        item->args.push_back(std::move(index));
        node = finish(std::move(item));
        continue;
      }
      if (peek().type != TokenType::name) fail(peek(), "expected an attribute name after '.'");
      auto attr = make(ExprKind::get_attr, pos, next().text);
      attr->args.push_back(std::move(node));
      node = finish(std::move(attr));
    } else if (is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      auto call = make(ExprKind::call, node->pos);
      call->args.push_back(std::move(node));
      parse_call_args(*call);
      node = finish(std::move(call));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const SourcePos pos = next().pos;
  DepthGuard guard(*this, peek());
  ExprPtr parts[3];
  int colons = 0;
  while (!is_op("]")) {
    if (accept_op(":")) {
      if (++colons > 2) fail(peek(), "too many ':' in slice");
      continue;
    }
    if (parts[colons]) fail(peek(), "expected ':' or ']' in subscript, found " + describe(peek()));
    parts[colons] = parse_expression();
  }
  next();
  if (colons == 0 && !parts[0]) fail(peek(), "empty subscript '[]'");
  auto e = make(colons == 0 ? ExprKind::get_item : ExprKind::slice, pos);
  e->args.push_back(std::move(node));
  e->args.push_back(std::move(parts[0]));
  if (colons > 0) {
    e->args.push_back(std::move(parts[1]));
    e->args.push_back(std::move(parts[2]));
  }
  return finish(std::move(e));
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  DepthGuard guard(*this, peek());
  while (!accept_op(")")) {
    if (is_op("*") || is_op("**")) fail(peek(), "unsupported template construct: '*args' / '**kwargs' in a call");
    if (peek().type == TokenType::name && is_op("=", 1)) {
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!call.kwargs.empty()) fail(peek(), "positional argument after keyword argument");
      call.args.push_back(parse_expression());
    }
    if (!is_op(")")) expect_op(",");
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      const SourcePos pos = next().pos;
      const Token& name_token = peek();
      auto filter = make(ExprKind::filter, pos, expect_identifier());
      if (!is_known_filter(filter->name)) fail(name_token, "unsupported filter '" + filter->name + "'");
      filter->args.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*filter);
      node = finish(std::move(filter));
    } else if (is_name("is")) {
      const SourcePos pos = next().pos;
      const bool negated = accept_name("not");
      if (peek().type != TokenType::name) fail(peek(), "expected a test name after 'is'");
      const Token& name_token = next();
      if (!is_known_test(name_token.text)) fail(name_token, "unsupported test '" + name_token.text + "'");
      auto test = make(ExprKind::test, pos, name_token.text);
      test->negated = negated;
      test->args.push_back(std::move(node));
      const TokenType t = peek().type;
      if (is_op("(")) {
        parse_call_args(*test);
      } else if ((t == TokenType::string || t == TokenType::integer || t == TokenType::floating ||
                  (t == TokenType::name && !is_keyword(peek().text)) || is_op("[") || is_op("{"))) {
        test->args.push_back(parse_postfix(parse_primary()));
      }
      node = finish(std::move(test));
    } else if (is_op("(")) {
      auto call = make(ExprKind::call, peek().pos);
      call->args.push_back(std::move(node));
      parse_call_args(*call);
      node = finish(std::move(call));
    } else {
      return node;
    }
  }
}

}  // namespace

Program parse_program(std::string_view source) {
  return Parser(tokenize(source)).run();
}

}  // namespace hearth::tmpl
