#include "template/interpreter.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace hearth::tmpl {

Interpreter::DepthGuard::DepthGuard(Interpreter& interpreter) : in(interpreter) {
  if (++in.depth_ > in.limits_.max_depth) {
    throw_error("template recursion deeper than " + std::to_string(in.limits_.max_depth) + " levels");
  }
}

Interpreter::Interpreter(const Program& program, Object globals, Limits limits, Clock clock)
    : program_(program), limits_(limits), clock_(std::move(clock)) {
  add_builtin_globals(globals);
  frames_.push_back(Frame{std::move(globals.items), false});
}

std::string Interpreter::render() {
  exec_body(program_.body);
  return std::move(out_);
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    throw_error("template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

void Interpreter::count_steps(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) throw_error("template exceeded " + std::to_string(limits_.max_steps) + " steps");
}

void Interpreter::emit(std::string_view text) {
  bytes_written_ += text.size();
  check_size(bytes_written_);
  out_ += text;
}

Value Interpreter::lookup(const std::string& name) const {
  for (size_t i = frames_.size(); i-- > 0;) {
    for (const auto& [k, v] : frames_[i].vars) {
      if (k == name) return v;
    }
    if (frames_[i].macro_barrier) i = 1;  // continue at frame 0, the globals
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value value) {
  for (auto& [k, v] : frames_.back().vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  frames_.back().vars.emplace_back(name, std::move(value));
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = exec(*stmt);
    if (flow != Flow::normal) return flow;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt) {
  count_steps(1);
  DepthGuard guard(*this);
  try {
    return exec_inner(stmt);
  } catch (TemplateError& error) {
    if (!error.raised && !error.located) {
      error.message = to_string(stmt.pos) + ": " + error.message;
      error.located = true;
    }
    throw;
  }
}

Interpreter::Flow Interpreter::exec_inner(const Stmt& stmt) {
  switch (stmt.kind) {
    case StmtKind::text:
      emit(stmt.text);
      return Flow::normal;
    case StmtKind::output:
      emit(eval(*stmt.expr).str());
      return Flow::normal;
    case StmtKind::if_:
      for (size_t i = 0; i < stmt.bodies.size(); ++i) {
        if (i >= stmt.conditions.size() || eval(*stmt.conditions[i]).truthy()) return exec_body(stmt.bodies[i]);
      }
      return Flow::normal;
    case StmtKind::for_:
      return exec_for(stmt);
    case StmtKind::set:
      exec_set(stmt);
      return Flow::normal;
    case StmtKind::set_block:
      assign(stmt.targets[0], Value(capture(stmt.bodies[0])));
      return Flow::normal;
    case StmtKind::macro:
      assign(stmt.text, define_macro(stmt));
      return Flow::normal;
    case StmtKind::break_:
      return Flow::break_;
    case StmtKind::continue_:
      return Flow::continue_;
    case StmtKind::body:
      return exec_body(stmt.bodies[0]);
  }
  return Flow::normal;
}

static Value make_loop_object(const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto index = static_cast<int64_t>(i);
  Object loop;
  loop.items.reserve(10);
  loop.items.emplace_back("index", Value(index + 1));
  loop.items.emplace_back("index0", Value(index));
  loop.items.emplace_back("revindex", Value(n - index));
  loop.items.emplace_back("revindex0", Value(n - index - 1));
  loop.items.emplace_back("first", Value(i == 0));
  loop.items.emplace_back("last", Value(index == n - 1));
  loop.items.emplace_back("length", Value(n));
  loop.items.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
  loop.items.emplace_back("nextitem", index + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
  loop.items.emplace_back("cycle", Value(Callable{"loop.cycle", [i](Interpreter&, const CallArgs& args) -> Value {
                                                    if (args.positional.empty())
                                                      throw_error("loop.cycle() needs at least one argument");
                                                    return args.positional[i % args.positional.size()];
                                                  }}));
  loop.is_namespace = true;  // attribute access only; no dict methods
  return Value(std::move(loop));
}

Interpreter::Flow Interpreter::exec_for(const Stmt& stmt) {
  std::vector<Value> all = iterate(eval(*stmt.expr));
  frames_.push_back(Frame{});
  std::vector<Value> items;
  if (stmt.condition) {
    for (Value& item : all) {
      count_steps(1);
      bind_targets(stmt.targets, item);
      if (eval(*stmt.condition).truthy()) items.push_back(std::move(item));
    }
  } else {
    items = std::move(all);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    count_steps(1);
    bind_targets(stmt.targets, items[i]);
    assign("loop", make_loop_object(items, i));
    if (exec_body(stmt.bodies[0]) == Flow::break_) break;
  }
  frames_.pop_back();
  if (items.empty()) return exec_body(stmt.else_body);
  return Flow::normal;
}

void Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    assign(targets[0], value);
    return;
  }
  const std::vector<Value> parts = iterate(value);
  if (parts.size() != targets.size()) {
    throw_error("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) +
                " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], parts[i]);
}

void Interpreter::exec_set(const Stmt& stmt) {
  Value value = eval(*stmt.expr);
  if (stmt.target_attr.empty()) {
    bind_targets(stmt.targets, value);
    return;
  }
  const Value ns = lookup(stmt.targets[0]);
  if (!ns.is_object() || !ns.as_object().is_namespace) {
    throw_error("cannot assign attribute '" + stmt.target_attr + "' on '" + stmt.targets[0] +
                "': only namespace() objects accept attribute assignment");
  }
  ns.mutable_object().set(stmt.target_attr, std::move(value));
}

std::string Interpreter::capture(const Body& body) {
  std::string saved = std::move(out_);
  out_.clear();
  exec_body(body);
  std::string captured = std::move(out_);
  out_ = std::move(saved);
  return captured;
}

Value Interpreter::define_macro(const Stmt& stmt) {
  const Stmt* macro = &stmt;
  return Value(Callable{
      stmt.text, [macro](Interpreter& in, const CallArgs& args) -> Value { return in.call_macro(*macro, args); }});
}

Value Interpreter::call_macro(const Stmt& stmt, const CallArgs& args) {
  if (args.positional.size() > stmt.params.size()) {
    throw_error("macro '" + stmt.text + "' takes " + std::to_string(stmt.params.size()) + " arguments, got " +
                std::to_string(args.positional.size()));
  }
  Frame frame;
  frame.macro_barrier = true;
  for (size_t i = 0; i < stmt.params.size(); ++i) {
    const MacroParam& param = stmt.params[i];
    const Value* given = args.get(param.name, i);
    frame.vars.emplace_back(param.name, given                 ? *given
                                        : param.default_value ? eval(*param.default_value)
                                                              : Value::undefined(param.name));
  }
  frames_.push_back(std::move(frame));
  std::string text = capture(stmt.bodies[0]);
  frames_.pop_back();
  return Value(std::move(text));
}

// ---- expressions ----

Value Interpreter::eval(const Expr& expr) {
  DepthGuard guard(*this);
  try {
    return eval_inner(expr);
  } catch (TemplateError& error) {
    if (!error.raised && !error.located) {
      error.message = to_string(expr.pos) + ": " + error.message;
      error.located = true;
    }
    throw;
  }
}

Value Interpreter::eval_inner(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::literal:
      return expr.literal;
    case ExprKind::name:
      return lookup(expr.name);
    case ExprKind::list:
    case ExprKind::tuple: {
      Array items;
      for (const ExprPtr& item : expr.args) items.push_back(eval(*item));
      return expr.kind == ExprKind::tuple ? Value::tuple(std::move(items)) : Value(std::move(items));
    }
    case ExprKind::dict: {
      Object object;
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        const Value key = eval(*expr.args[i]);
        object.set(key.str(), eval(*expr.args[i + 1]));
      }
      return Value(std::move(object));
    }
    case ExprKind::get_attr:
      return get_attr(eval(*expr.args[0]), expr.name);
    case ExprKind::get_item:
      return get_item(eval(*expr.args[0]), eval(*expr.args[1]));
    case ExprKind::slice:
      return eval_slice(expr);
    case ExprKind::call:
      return eval_call(expr);
    case ExprKind::filter: {
      const Value input = eval(*expr.args[0]);
      return apply_filter(*this, expr.name, input, eval_args(expr, 1));
    }
    case ExprKind::test: {
      const Value input = eval(*expr.args[0]);
      return Value(apply_test(*this, expr.name, input, eval_args(expr, 1)) != expr.negated);
    }
    case ExprKind::unary: {
      const Value v = eval(*expr.args[0]);
      if (expr.name == "not") return Value(!v.truthy());
      if (v.is_int() || v.is_bool()) {
        const int64_t i = v.is_bool() ? int64_t{v.as_bool()} : v.as_int();
        if (expr.name == "-") return i == INT64_MIN ? Value(-double(i)) : Value(-i);
        return Value(i);
      }
      if (v.is_float()) return Value(expr.name == "-" ? -v.as_double() : v.as_double());
      throw_error(std::string("bad operand type for unary ") + expr.name + ": '" + v.type_name() + "'");
    }
    case ExprKind::binary:
      return eval_binary(expr);
    case ExprKind::conditional:
      if (eval(*expr.args[1]).truthy()) return eval(*expr.args[0]);
      return expr.args[2] ? eval(*expr.args[2]) : Value::undefined("conditional");
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& expr) {
  const std::string& op = expr.name;
  Value lhs = eval(*expr.args[0]);
  if (op == "and") return lhs.truthy() ? eval(*expr.args[1]) : lhs;
  if (op == "or") return lhs.truthy() ? lhs : eval(*expr.args[1]);
  return binary_op(*this, op, lhs, eval(*expr.args[1]));
}

CallArgs Interpreter::eval_args(const Expr& expr, size_t first) {
  CallArgs args;
  for (size_t i = first; i < expr.args.size(); ++i) args.positional.push_back(eval(*expr.args[i]));
  for (const auto& [name, value] : expr.kwargs) args.keyword.emplace_back(name, eval(*value));
  return args;
}

Value Interpreter::eval_call(const Expr& expr) {
  const Value callee = eval(*expr.args[0]);
  if (!callee.is_callable()) {
    const std::string what = expr.args[0]->kind == ExprKind::name       ? expr.args[0]->name
                             : expr.args[0]->kind == ExprKind::get_attr ? expr.args[0]->name
                                                                        : std::string("expression");
    if (callee.is_undefined()) throw_error("'" + what + "' is undefined (not a known function or method)");
    throw_error("'" + what + "' is not callable (it is a " + callee.type_name() + ")");
  }
  return call(callee, eval_args(expr, 1));
}

Value Interpreter::call(const Value& callee, const CallArgs& args) {
  count_steps(1);
  DepthGuard guard(*this);
  return callee.as_callable().fn(*this, args);
}

static int64_t slice_bound(const Value& v, int64_t n, int64_t fallback, bool is_start, int64_t step) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_int()) throw_error("slice indices must be integers");
  int64_t i = v.as_int();
  if (i < 0) i += n;
  if (step > 0) return std::clamp<int64_t>(i, 0, n);
  return std::clamp<int64_t>(i, -1, n - 1);
}

Value Interpreter::eval_slice(const Expr& expr) {
  const Value target = eval(*expr.args[0]);
  const Value start = expr.args[1] ? eval(*expr.args[1]) : Value();
  const Value stop = expr.args[2] ? eval(*expr.args[2]) : Value();
  const Value step_value = expr.args[3] ? eval(*expr.args[3]) : Value();
  int64_t step = 1;
  if (!step_value.is_undefined() && !step_value.is_none()) {
    if (!step_value.is_int() || step_value.as_int() == 0) throw_error("slice step must be a non-zero integer");
    step = step_value.as_int();
  }
  std::vector<size_t> offsets;
  int64_t n = 0;
  if (target.is_string()) {
    offsets = utf8_offsets(target.as_string());
    n = static_cast<int64_t>(offsets.size()) - 1;
  } else if (target.is_array()) {
    n = static_cast<int64_t>(target.as_array().size());
  } else if (target.is_undefined() || target.is_none()) {
    return Value::undefined("slice");
  } else {
    throw_error(std::string("cannot slice a ") + target.type_name());
  }
  const int64_t lo = slice_bound(start, n, step > 0 ? 0 : n - 1, true, step);
  const int64_t hi = slice_bound(stop, n, step > 0 ? n : -1, false, step);
  if (step == 1 && target.is_string()) {
    return Value(lo >= hi ? std::string() : target.as_string().substr(offsets[lo], offsets[hi] - offsets[lo]));
  }
  std::string s;
  Array a;
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
    count_steps(1);
    if (target.is_string()) {
      s.append(target.as_string(), offsets[i], offsets[i + 1] - offsets[i]);
    } else {
      a.push_back(target.as_array()[i]);
    }
  }
  return target.is_string() ? Value(std::move(s)) : Value(std::move(a));
}

}  // namespace hearth::tmpl
