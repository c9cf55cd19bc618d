// api.cpp — the host's side of the embedding API (vlad.hpp): value handles, conversions, the
// Interpreter class and the public vlad::Error. All interpreter work goes through bridge.hpp.
#include "../vlad.hpp"

#include "bridge.hpp"

namespace vlad {
namespace detail {

[[noreturn]] void raise(const ErrorInfo& e) {
  std::vector<Frame> trace;
  for (const FrameInfo& f : e.trace) trace.push_back(Frame{f.name, f.file, f.line, f.col});
  throw vlad::Error(e.message, e.file, e.line, e.col, std::move(trace), e.omitted, e.located, e.report);
}

}  // namespace detail

inline namespace embed {

// ---- Value ----

Value::Value(double x) : root_(detail::root_real(x)) {}
Value::Value(bool b) : root_(detail::root_boolean(b)) {}
Value::Value(const std::vector<double>& xs) : root_(detail::root_reals(xs)) {}
Value::Value(const Value& other) noexcept : root_(other.root_) {
  if (root_) detail::retain(root_);
}
Value& Value::operator=(const Value& other) noexcept {
  if (other.root_) detail::retain(other.root_);
  if (root_) detail::release(root_);
  root_ = other.root_;
  return *this;
}
Value& Value::operator=(Value&& other) noexcept {
  if (this != &other) {
    if (root_) detail::release(root_);
    root_ = other.root_;
    other.root_ = nullptr;
  }
  return *this;
}
Value::~Value() {
  if (root_) detail::release(root_);
}

// ---- building values ----

Value real(double x) { return Value(x); }
Value boolean(bool b) { return Value(b); }
Value string_value(const std::string& s) { return Value::adopt(detail::root_string(s)); }
Value cons(const Value& a, const Value& b) { return Value::adopt(detail::root_pair(a.root(), b.root())); }

namespace {

std::vector<const detail::Root*> roots(const std::vector<Value>& items) {
  std::vector<const detail::Root*> out;
  for (const Value& v : items) out.push_back(v.root());
  return out;
}

}  // namespace

Value list_of(const std::vector<Value>& items) { return Value::adopt(detail::root_list(roots(items), false)); }
Value tuple_of(const std::vector<Value>& items) { return Value::adopt(detail::root_list(roots(items), true)); }

// ---- inspecting values ----

bool is_real(const Value& v) { return detail::type_of(v.root()) == detail::Type::Real; }
bool is_bool(const Value& v) { return detail::type_of(v.root()) == detail::Type::Boolean; }
bool is_null(const Value& v) { return detail::type_of(v.root()) == detail::Type::Null; }
bool is_pair(const Value& v) { return detail::type_of(v.root()) == detail::Type::Pair; }
bool is_string(const Value& v) { return detail::type_of(v.root()) == detail::Type::String; }
bool is_procedure(const Value& v) { return detail::type_of(v.root()) == detail::Type::Procedure; }
double to_real(const Value& v) { return detail::real_of(v.root(), "to_real"); }
bool to_bool(const Value& v) { return detail::boolean_of(v.root(), "to_bool"); }
std::string to_std_string(const Value& v) { return detail::text_of(v.root(), "to_std_string"); }
std::vector<double> to_vector(const Value& v) { return detail::reals_of(v.root(), "to_vector"); }
std::vector<Value> to_list(const Value& v) {
  std::vector<Value> out;
  for (detail::Root* r : detail::items_of(v.root(), "to_list")) out.push_back(Value::adopt(r));
  return out;
}
Value car(const Value& v) { return Value::adopt(detail::car_of(v.root(), "car")); }
Value cdr(const Value& v) { return Value::adopt(detail::cdr_of(v.root(), "cdr")); }
std::string to_string(const Value& v) { return detail::write_of(v.root()); }

// ---- Interpreter ----

Interpreter::Interpreter() : impl_(detail::open_session()) {}
Interpreter::~Interpreter() { detail::close_session(impl_); }

Value Interpreter::eval_string(const std::string& text, const std::string& name) {
  return Value::adopt(detail::eval_text(impl_, text, name, "."));
}
Value Interpreter::eval_file(const std::string& path) { return Value::adopt(detail::eval_file(impl_, path)); }
Value Interpreter::global(const std::string& name) const { return Value::adopt(detail::read_global(impl_, name)); }
void Interpreter::define(const std::string& name, const Value& v) { detail::write_global(impl_, name, v.root()); }
Value Interpreter::call(const Value& f, const Value& arg) {
  return Value::adopt(detail::call(impl_, f.root(), arg.root()));
}

namespace {

// Everything define_primitive registers is checked first (the primitive and, recursively, its
// partials), so that a call that throws has registered nothing: a partial NAME/d0 registered
// before an error further on would have changed an existing primitive's derivative.
void check_host_tree(detail::Session* s, const std::string& name, int arity, const HostFunction& fn) {
  if (!fn.partials.empty() && (int)fn.partials.size() != arity)
    detail::fail("define_primitive " + name + ": expected " + std::to_string(arity) + " partial derivatives, got " +
                 std::to_string(fn.partials.size()));
  detail::check_host(s, name, arity, static_cast<bool>(fn.f));
  for (size_t i = 0; i < fn.partials.size(); i++)
    check_host_tree(s, name + "/d" + std::to_string(i), arity, fn.partials[i]);
}

// Partials first, depth first, so that each primitive's rules find the primitives they call.
void define_host_tree(detail::Session* s, const std::string& name, int arity, const HostFunction& fn) {
  std::vector<std::string> names;
  for (size_t i = 0; i < fn.partials.size(); i++) {
    names.push_back(name + "/d" + std::to_string(i));
    define_host_tree(s, names.back(), arity, fn.partials[i]);
  }
  detail::define_host(s, name, arity, fn.f, std::move(names));
}

}  // namespace

void Interpreter::define_primitive(const std::string& name, int arity, const HostFunction& fn) {
  check_host_tree(impl_, name, arity, fn);
  define_host_tree(impl_, name, arity, fn);
}

double Interpreter::gradient(const Value& f, double x) {
  return to_real(Value::adopt(detail::call_library(impl_, "gradient", f.root(), Value(x).root())));
}
std::vector<double> Interpreter::gradient(const Value& f, const std::vector<double>& x) {
  return to_vector(Value::adopt(detail::call_library(impl_, "gradient", f.root(), Value(x).root())));
}
std::vector<double> Interpreter::gradient(const Value& f, std::initializer_list<double> x) {
  return gradient(f, std::vector<double>(x));
}
Value Interpreter::derivative(const Value& f, double x) {
  return Value::adopt(detail::call_library(impl_, "derivative", f.root(), Value(x).root()));
}
std::vector<double> Interpreter::hessian_vector_product(const Value& f, const std::vector<double>& x,
                                                        const std::vector<double>& v) {
  Value xv = cons(Value(x), Value(v));
  return to_vector(Value::adopt(detail::call_library(impl_, "hessian-vector-product", f.root(), xv.root())));
}

std::uint64_t Interpreter::meter_total() const { return detail::session_meter(impl_); }
void Interpreter::meter_reset() { detail::session_meter_reset(impl_); }
Interpreter::Meter Interpreter::meter() const {
  std::vector<std::uint64_t> v = detail::session_meter_all(impl_);
  Meter m;
  m.operations = v[0];
  m.steps = v[1];
  m.applications = v[2];
  m.objects = v[3];
  m.bytes = v[4];
  m.retained_peak = v[5];
  m.analysis_objects = v[6];
  m.analysis_bytes = v[7];
  m.transformed_bindings = v[8];
  m.native_bodies = v[9];
  m.analysis_ns = v[10];
  return m;
}
void Interpreter::measure_retained(bool on) { detail::session_measure_retained(impl_, on); }
void Interpreter::set_heap_limit(std::size_t bytes) { detail::set_heap_limit_bytes(bytes); }
std::size_t Interpreter::heap_limit() { return detail::heap_limit_bytes(); }
void Interpreter::set_depth_limit(long calls) { detail::session_set_depth_limit(impl_, calls); }
long Interpreter::depth_limit() const { return detail::session_depth_limit(impl_); }
void Interpreter::set_jit(bool on) { detail::session_set_jit(impl_, on, 0); }
bool Interpreter::jit() const { return detail::session_jit(impl_); }
bool Interpreter::jit_supported() { return detail::jit_available(); }
void Interpreter::set_jit_threshold(unsigned runs) { detail::session_set_jit(impl_, detail::session_jit(impl_), runs); }

}  // namespace embed
}  // namespace vlad
