#pragma once
// Result<T>: the value-or-error type every expected failure returns (bad files, bad input).
// Exceptions never cross a layer boundary; broken invariants abort through HEARTH_CHECK instead.

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace hearth {

// A failure a user can act on: the message says what, where and why.
struct Error {
  std::string message;
};

template <class... Args>
[[nodiscard]] Error make_error(fmt::format_string<Args...> format, Args&&... args) {
  return Error{fmt::format(format, std::forward<Args>(args)...)};
}

// E is the error type: Error (a message) unless a caller must act on the kind of failure (e.g. SubmitError).
template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor): mirrors std::expected
  Result(E error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const E& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, E> state_;
};

template <class E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const E& error() const { return error_; }

 private:
  E error_{};
  bool ok_ = true;
};

[[noreturn]] inline void fail_check(const char* expr, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "hearth: invariant broken at %s:%d: %s %s\n", file, line, expr, message.c_str());
  std::abort();
}

}  // namespace hearth

// Aborts loudly when an invariant is broken. Not for expected failures: those return Result.
#define HEARTH_CHECK(cond, ...)                                                                \
  do {                                                                                         \
    if (!(cond)) ::hearth::fail_check(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)

// Propagates an error from an expression returning Result<...>.
#define HEARTH_TRY(expr)                                        \
  do {                                                          \
    auto hearth_try_result_ = (expr);                           \
    if (!hearth_try_result_) return hearth_try_result_.error(); \
  } while (0)
