#pragma once
// Tree-walking interpreter for parsed chat templates. One Interpreter renders once; it is cheap to build.
// Guards: a step budget (statements + loop iterations), a recursion-depth limit, and an output/string size limit,
// so no template or input can hang or exhaust memory; each trips a TemplateError.

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace hearth::tmpl {

struct Limits {
  int64_t max_steps = 5'000'000;        // statements executed + loop iterations + calls
  int max_depth = 400;                  // nested evaluation/statement depth (macro recursion counts here)
  size_t max_output_bytes = 64u << 20;  // total text written, and the size of any single string built
};

using Clock = std::function<std::chrono::system_clock::time_point()>;

class Interpreter {
 public:
  // `globals` are the context variables (messages, bos_token, ...); builtin functions are added on top.
  Interpreter(const Program& program, Object globals, Limits limits, Clock clock);

  // Renders the program. Throws TemplateError (raised=true for raise_exception).
  std::string render();

  // ---- services for builtins ----
  Value call(const Value& callee, const CallArgs& args);
  void check_size(size_t bytes) const;
  void count_steps(int64_t n);
  std::chrono::system_clock::time_point now() const { return clock_(); }

 private:
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    bool macro_barrier = false;  // lookups skip from a macro's frame straight to the globals
  };
  enum class Flow { normal, break_, continue_ };

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);
  void emit(std::string_view text);

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& stmt);
  Flow exec_inner(const Stmt& stmt);
  Flow exec_for(const Stmt& stmt);
  void exec_set(const Stmt& stmt);
  void bind_targets(const std::vector<std::string>& targets, const Value& value);
  Value define_macro(const Stmt& stmt);
  Value call_macro(const Stmt& stmt, const CallArgs& args);
  std::string capture(const Body& body);

  Value eval(const Expr& expr);
  Value eval_inner(const Expr& expr);
  Value eval_binary(const Expr& expr);
  Value eval_call(const Expr& expr);
  CallArgs eval_args(const Expr& expr, size_t first);
  Value eval_slice(const Expr& expr);

  struct DepthGuard {
    explicit DepthGuard(Interpreter& in);
    ~DepthGuard() { --in.depth_; }
    Interpreter& in;
  };

  const Program& program_;
  Limits limits_;
  Clock clock_;
  std::vector<Frame> frames_;
  std::string out_;
  size_t bytes_written_ = 0;
  int64_t steps_ = 0;
  int depth_ = 0;
};

// Operators and builtins (operators.cpp, builtins.cpp).
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
Value get_attr(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);
std::vector<Value> iterate(const Value& value);  // for-loop semantics; throws for non-iterables
Value apply_filter(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);
void add_builtin_globals(Object& globals);

}  // namespace hearth::tmpl
