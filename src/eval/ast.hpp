// ast.hpp — the analysed form of VLAD code, which eval runs and the AD transforms rewrite.
// Every lambda body is in A-normal form over alpha-converted variables (paper §4).
#pragma once
#include "../values/error.hpp"
#include "../values/value.hpp"

namespace vlad {

struct Lambda;
struct Code;
struct Interp;

// An alpha-converted variable. Each Var object is bound exactly once: as the parameter of one
// lambda or by one binding in that lambda's body (its owner). 32 bytes: transformed code makes
// them by the ten thousand under nesting, and all stay live.
struct Var {
  const char* name;
  int id;
  int slot = -1;  // frame slot in its owner, assigned when the owner is compiled
  // The compiler's working notes (analyse.cpp), valid while `mark` is its current pass: uses,
  // the position of the last read (-1: none), the index among the free variables (-1: none;
  // kLocalVar: bound in the lambda being compiled, at `slot`).
  uint32_t mark = 0;
  int uses = 0, last_read = -1, free_index = -1;
  static constexpr int kLocalVar = -2;
};
static_assert(sizeof(Var) == 32, "Var: keep it two granules of the collector");

// A top-level (global) variable: a mutable cell, looked up late, so that top-level definitions are
// mutually recursive and can be replaced at the REPL.
struct Cell {
  const char* name;
  Value value;  // Value::unbound() until defined
};

// The binding forms of an A-normal body `let x1 = e1; ...; xn = en in x_result`.
enum class Op : uint8_t {
  Const,   // x = constant (already transformed, in transformed lambdas)
  Copy,    // x = a
  Global,  // x = xf(value of cell): a top-level variable, seen through the transforms `xf`
  App,     // x = (a b)
  Lambda,  // x = closure of `lam` whose env is the values of `caps` (in lam->free order)
  Cons,    // x = (cons a b)
  Car,     // x = car of a, destructuring a pattern; on a lazy zero gives a lazy zero
  Cdr,     // x = cdr of a
  Check,   // x = '(); a must equal `constant` (a constant pattern)
  If,      // x = if a then `then_` else `else_` (a is not #f)
  EnvRef,  // x = env[index] of a, a closure of `lam` (AD-internal: environment sensitivities)
  BackCall,  // x = (unsensitize (a (sensitize b))): calling a backpropagator (AD-internal; the
             // transforms expand it into those three calls before transforming it). Skipped, giving
             // the placeholder zero, when b is a zero (a backpropagator is linear).
  Sens,      // x = a, or the zero of (*j-inverse b) when a is the placeholder zero (AD-internal:
             // completes a sensitivity before it is built into a structure or returned). With
             // a path (Binding::index, sens_path), of that part of b: its car/cdr taken only then.
};

struct Body;

// A Value kept in a union (Binding): its bits, with no constructor; reads as the Value.
struct RawValue {
  uint64_t bits;
  operator Value() const { return Value(bits, 0); }
  RawValue& operator=(Value v) {
    bits = v.bits;
    return *this;
  }
  bool operator==(Value o) const { return bits == o.bits; }
  bool is_real() const { return Value(bits, 0).is_real(); }
  double as_real() const { return Value(bits, 0).as_real(); }
  bool is_obj() const { return Value(bits, 0).is_obj(); }
  Obj* as_obj() const { return Value(bits, 0).as_obj(); }
};

// 80 bytes: transformed code is large, nested transforms multiply it, and every binding stays
// live (the source of the next level's transform), touched when made and marked by each
// collection. What only some ops use shares one union: read a field only for its ops.
struct Binding {
  Op op = Op::Const;
  // App: call the raw entry of a's value (a backpropagator's body, or the same transform of it:
  // Lambda::raw_variant) — what a BackCall becomes under the transforms, which apply `xf` to it.
  bool raw_call = false;
  int index = 0;  // EnvRef: the slot; Sens: a path of car/cdr into b (sens_path), 0 for none
  Var* x = nullptr;
  Var* a = nullptr;
  Var* b = nullptr;
  Pos pos;
  union {
    struct {
      RawValue constant;    // Const, Check
      const char* pattern;  // Car, Cdr, Check: the pattern, for "does not match pattern"
    };
    struct {
      Lambda* lam;  // Lambda, EnvRef
      Var** caps;   // Lambda: one per lam->free (null: lam->free themselves)
    };
    struct {
      Body* then_;  // If
      Body* else_;
    };
    struct {
      Cell* cell;  // Global
      RawValue cache_in;   // Global with transforms: last cell value seen (0: none) ...
      RawValue cache_out;  // ... and its transform
      const char* xf;      // Global, App (raw_call): transforms to apply, in order ("F", "R", "FR", ...)
    };
  };
  Binding() {
    constant.bits = 0;
    pattern = nullptr;
    cache_out.bits = 0;
    xf = "";
  }
};
static_assert(sizeof(Binding) == 80, "Binding: 80 bytes");

struct Body {
  gc_vector<Binding> binds;
  Var* result = nullptr;
};

struct Prim;

// A lambda expression: one parameter, an A-normal body, and its free variables in a fixed order.
struct Lambda {
  Var* param = nullptr;
  Body* body = nullptr;
  gc_vector<Var*> free;
  const char* name = nullptr;  // for #<procedure name> and call traces
  Pos pos;

  // Transforms (paper §4): `transform` is 'F' or 'R' when this lambda was made by transforming
  // `source`; `fwd`/`rev` cache this lambda's own transforms, computed once.
  char transform = 0;
  Lambda* source = nullptr;
  Lambda* fwd = nullptr;
  Lambda* rev = nullptr;
  // A reverse transform made without treating calls of the user's `car`/`cdr` as projections:
  // what the first-level transform of a user lambda runs once they are not the builtins.
  bool general = false;
  Lambda* rev_general = nullptr;  // (cached on the source lambda)
  Lambda* fwd_plain = nullptr;  // the transforms of this lambda's own body (for a raw
  Lambda* rev_plain = nullptr;  // backpropagator, `fwd`/`rev` are those of `wrapped`)
  // A transform's body is made when it is first needed (ensure_body): until then body is null
  // and this lambda is the `lazy_kind` ('F', 'R', or 'W' for tagged_version) of `lazy_of`.
  Lambda* lazy_of = nullptr;
  char lazy_kind = 0;
  // A rule lambda: the VLAD code of a primitive's forward ('F') or reverse ('R') version.
  Prim* rule_of = nullptr;
  char rule_kind = 0;

  // A letrec group (members share one free-variable list; a member refers to a sibling by a
  // Lambda binding over its own free variables). Null for a lone lambda.
  gc_vector<Lambda*>* group = nullptr;
  bool free_done = false;

  // A native implementation of this lambda's body, for the rule lambdas of builtin primitives
  // (src/ad/native.cpp). It returns Value::unbound() when its argument is outside its fast case
  // (e.g. a nested transform), and the interpreter then runs the body as usual.
  Value (*native1)(Closure*, Value) = nullptr;
  Value (*native2)(Closure*, Value, Value) = nullptr;  // the argument is the pair (a . b)
  // The same, for a caller that takes the result pair apart at once (a reverse transform's
  // `(cons value backpropagator)`): the two halves go to out[0], out[1]; false = fall back.
  bool (*native_split1)(Closure*, Value, Value* out) = nullptr;
  bool (*native_split2)(Closure*, Value, Value, Value* out) = nullptr;
  Prim* native_prim = nullptr;
  // The forward version of a linear function (an AD primitive's forward rule, and forward
  // transforms of it): F(M)(v) = (bundle (M (primal v)) (perturb (M (unperturb (tangent v))))),
  // computed natively by calling M, the closure of `source` (native.cpp).
  bool linear_forward = false;
  Lambda* native_bp = nullptr;  // a reverse rule's backpropagator lambda
  // Reverse over reverse (native.cpp, rr_*): on the transform of +, - or *'s reverse rule, or of
  // its backpropagator's raw body, the lambda of the backpropagator its forward phase returns,
  // and for each of that lambda's free variables what it holds (RrSlot); kRrUnusable: the body
  // does not have the shape the native forms assume, so it runs as it is.
  Lambda* rr_obp = nullptr;
  int8_t rr_slots[6] = {0, 0, 0, 0, 0, 0};
  // A backpropagator's native body without the sensitivity tags, for BackCall: ȳ to f̄ in
  // out[0] and x̄ in out[1]; false = fall back.
  bool (*native_back)(Closure*, Value, Value* out) = nullptr;

  // A backpropagator made by the reverse transform: it takes ȳ and returns (f̄ . x̄) untagged. As
  // a procedure it is (sensitize ∘ body ∘ unsensitize); `wrapped` is that lambda, made when a
  // transform or a generic caller needs it.
  bool raw_bp = false;
  bool way_out = false;  // the backpropagator of a way out of a reverse transform's body: (f̄ . x̄)
  // A raw backpropagator whose body only builds structures from ȳ and zeros (no calls but of zero
  // and %rzero, no backpropagator calls): given ȳ = +0.0 it returns the zeros of its inputs'
  // shapes, which the placeholder zero stands for, so a caller skips it (back_call, jit.cpp).
  bool structural = false;
  Lambda* wrapped = nullptr;
  // The transform of a raw backpropagator's body, for the transform of that backpropagator (whose
  // lambda is the transform of `wrapped`): what a transformed BackCall calls (Binding::raw_call).
  Lambda* raw_variant = nullptr;

  // Constants as free variables (paper §4): `cc` is this lambda with the reals among the
  // constants of its own body turned into free variables, appended to `free` (this lambda when
  // there are none), `cc_consts` their values in that order; `shape` is cc's text up to the
  // names of bound variables and the values of those constants (constant_converted, transform.cpp).
  Lambda* cc = nullptr;
  bool cc_none = false;  // known to have no such conversion (rules and their transforms): cc stays null
  gc_vector<Value>* cc_consts = nullptr;
  // In cc itself (and in transforms of it, whose free variables are its own in the same order):
  // how many of the last free variables are those constants, whose sensitivities are zero.
  int cc_nconst = 0;
  const char* shape = nullptr;

  Code* code = nullptr;     // compiled on first call
  // `code` once it has native code and nothing else runs in its place (no native implementation,
  // not a raw backpropagator): native callers then enter it directly (jit.cpp). Null otherwise.
  Code* direct = nullptr;
  // `code` of a raw backpropagator (raw_bp) once it has native code, starts no chain and has no
  // native form (native_back): native code's BackCall enters it as run_raw does (jit.cpp).
  Code* raw_direct = nullptr;
  // The same for a raw backpropagator that starts a chain (Code::chain_head): native code's
  // BackCall enters it at its first instruction when the chain from it is short (jit.cpp).
  Code* raw_chain = nullptr;
  Value empty_closure;      // when `free` is empty, the one closure of this lambda
  // The zero of empty_closure when this lambda has constants (a lazy zero, over them), made when
  // first needed: bp_list_ref gives list-ref's a call.
  Value empty_zero = Value::unbound();
  // The interpreter that made this lambda (the current one then; null if none was), so that the
  // embedding API can refuse a procedure of one interpreter passed to another.
  Interp* owner = nullptr;
};

// Sens's path into b (Binding::index): its length in the low 5 bits, then one bit a step from b
// outward (1: cdr, 0: car), at most kSensPathMax steps.
constexpr int kSensPathMax = 20;
inline int sens_path_length(int path) { return path & 31; }
inline bool sens_path_cdr(int path, int step) { return (path >> (5 + step)) & 1; }

Var* new_var(const char* name);
Lambda* new_lambda();
Body* new_body();

// Makes the body of a transform made lazily (transform.cpp); nothing for any other lambda.
void ensure_body(Lambda* lam);

// Computes the free variables of `lam` (and of every lambda nested in it), in variable-id order.
void compute_free_variables(Lambda* lam);

// Debug printing of the analysed form.
std::string lambda_to_string(const Lambda* lam);

}  // namespace vlad
