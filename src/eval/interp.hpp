// interp.hpp — the state of one interpreter: global cells, primitives, meter, limits, and the
// entry points that take source text to values (expand, analyse, eval).
#pragma once
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "../prims/prims.hpp"
#include "../values/reader.hpp"
#include "ast.hpp"

namespace vlad {

struct Interp {
  // Two global namespaces: the prelude's (closed over the builtins) and the user's, which starts
  // as a copy of the prelude's and may shadow any name.
  std::unordered_map<const char*, Cell*> prelude_cells, user_cells;
  // Every primitive, by id: the collector's objects, kept alive by this table (uncollectable,
  // scanned) while the interpreter lives, and after it by the values that still refer to them.
  std::vector<Prim*, traceable_allocator<Prim*>> prims;
  std::unordered_map<const char*, Prim*> prim_by_name;
  std::vector<uint64_t> meter;  // per prim id
  // Host primitives registered over (their ids went to their successors): weak references, each a
  // hidden pointer the collector clears when the primitive goes (add_prim, destroy_interp).
  std::vector<uintptr_t*> retired_prims;
  WorkCounters work_total{};      // steps, applications, allocation, of evaluations that have ended
  bool meter_retained = false;
  uint64_t gc_no_at_reset = 0;
  uint64_t gc_ms_at_reset = 0;  // and its time spent collecting  // the collector's count of collections when the meter was reset  // measure what backpropagators retain (a walk of each one called)
  // how a user raises it: the program's option, or the embedding API's setter
  const char* depth_limit_knob = "--depth-limit";
  long depth_limit = 4000000;  // nested non-tail calls: 10^6-step recursions and backpropagator chains (two calls a step) fit
  std::atomic<bool> interrupt{false};
  // The native tier (jit.cpp): on where supported unless VLAD_JIT=off; a lambda's body is
  // compiled when it has run `jit_threshold` times (VLAD_JIT_THRESHOLD).
  bool jit = false;
  uint32_t jit_threshold = 30;
  uint32_t jit_window_bits = 16;  // ... within a window of 2^16 steps (eval.cpp's hot(); VLAD_JIT_WINDOW)
  std::vector<std::string> include_dirs;
  std::set<std::string> included;
  std::string (*read_line)(Interp&) = nullptr;

  // Primitives the AD transforms insert into code.
  // The backpropagator of zeros (zero_backpropagator), made on first use; never collected.
  Lambda* zero_bp = nullptr;
  Prim *p_plus = nullptr, *p_zero = nullptr, *p_rzero = nullptr, *p_sensitize = nullptr,
       *p_unsensitize = nullptr, *p_star_j = nullptr, *p_star_j_inverse = nullptr;
  // The tangent of a forward-transformed procedure b is the procedure (%tangent-of b) =
  // (lambda (y) (unperturb (tangent (b (j* y))))): `tangent_of` is that prelude closure and
  // `tangent_fn` the inner lambda (docs/language.md, "Derivatives of functions").
  Value tangent_of = Value::unbound();
  Lambda* tangent_fn = nullptr;
  // The prelude's list-ref, whose reverse transform walks at once at the first level, and the
  // backpropagator it makes (the lambda of %list-ref-bp's closures), with car and cdr.
  Lambda *list_ref = nullptr, *list_ref_bp = nullptr;
  // The prelude's dot, whose reverse transform computes at once at the first level, and the
  // backpropagator it makes (the lambda of %dot-bp's closures).
  Lambda *dot = nullptr, *dot_bp = nullptr;
  // The prelude's distance, likewise (v-, dot and sqrt at once), and %distance-bp's lambda.
  Lambda *distance = nullptr, *distance_bp = nullptr;
  // The prelude's v+ and v-, whose reverse transforms apply + or -'s reverse rule at once at the
  // first level, with the backpropagators they make (%v+-bp's and %v--bp's lambdas).
  Lambda *v_plus = nullptr, *v_minus = nullptr, *vplus_bp = nullptr, *vminus_bp = nullptr;
  Prim *p_add = nullptr, *p_sub = nullptr;
  // The prelude's equal?, whose reverse transform compares data at the first level at once.
  Lambda* equal_p = nullptr;
  Prim *p_car = nullptr, *p_cdr = nullptr, *p_num_eq = nullptr, *p_zero_sens2 = nullptr, *p_error = nullptr;
  // The user's `car` and `cdr` cells, and a cell (not a name a program can refer to) holding #t
  // while both hold the builtin primitives: the first-level reverse transform of a user lambda
  // treats its calls of them as projections, behind a test of this cell (transform.cpp).
  Cell *user_car = nullptr, *user_cdr = nullptr, *builtin_projections = nullptr;
  // Called after a user cell is (re)defined: keeps `builtin_projections` true to the cells.
  void user_cell_written(Cell* c);

  // The prelude is read and expanded one definition at a time, when a name it defines is first
  // referenced (force_cell): a program that uses a few of its 119 definitions does not pay for the
  // rest at start-up. lazy_prelude maps a prelude cell to its definition's text, lazy_user a user
  // cell to the prelude cell it starts as a copy of, until each is forced.
  struct LazyDefinition {
    uint32_t begin = 0, end = 0;
    int line = 1;
    bool loading = false;
  };
  std::vector<LazyDefinition> lazy_definitions;
  std::unordered_map<Cell*, uint32_t> lazy_prelude;
  std::unordered_map<Cell*, Cell*> lazy_user;

  Interp();
  // (destroy_interp ends one: its cells and primitives are roots until then)
  Cell* cell(const char* name, bool prelude);
  // The value of a cell, its prelude definition read and run first if it has not been yet
  // (unbound if the name has none). Runs VLAD code: on the evaluation's thread.
  Value force_cell(Cell* c);
  // That of a prelude name (the interpreter's own uses of prelude functions).
  Value prelude_value(const char* name) { return force_cell(cell(intern(name), true)); }
  Prim* prim(const char* name) { return prim_by_name.at(intern(name)); }
  void add_prim(Prim* p);
};

// Frees an interpreter: its global cells and primitives (roots for the collector: what they held
// becomes garbage), then the object itself.
void destroy_interp(Interp* in);

// A program starts (a file run, a REPL input, a ,load, a --check file): no file has been included
// yet but `file`, the program's own (when it is one: "" for text that is not), so that a file
// including itself, or a cycle, is not spliced in twice, and a ,load again re-reads what an
// edited file includes.
void begin_program(Interp& in, const std::string& file);

// The interpreter running on this thread (set by the API and the CLI around each evaluation).
extern __thread Interp* current;

// ---- expansion (expand.cpp) ----
// A top-level form, analysed: either a definition of `cell` or an expression; `thunk` computes it.
struct TopLevel {
  Cell* cell = nullptr;  // non-null for (define ...)
  Lambda* thunk = nullptr;
  Pos pos;
  bool print = true;  // false for all but the last expression of a top-level begin
};
// Expands one top-level form (includes are spliced by the caller). `prelude` selects the
// prelude's namespace.
gc_vector<TopLevel> expand_toplevel(Interp& in, Sx* form, bool prelude, const std::string& dir);
// Whether an interned name is a keyword of the syntax (if, let, quote, cons, ...), which a
// top-level definition may not define: its calls would stay the syntax's.
bool is_syntax_keyword(const char* name);
// The error of defining one: "define: NAME is syntax; it cannot be defined at top level".
std::string syntax_definition_message(const char* name);

// ---- evaluation (eval.cpp) ----
Value apply(Value f, Value arg, Pos call_pos = Pos());
// Raises "interrupted" when this thread's interpreter has been interrupted (Ctrl-C): for long
// walks outside evaluation (printing); located at `at` (reading and expanding a large program).
void poll_interrupt();
void poll_interrupt(Pos at);
// Applies f to arg for a caller that takes the result pair apart at once: when the callee delivers
// the two halves (a reverse-transformed body, a native reverse rule) they go to out[0], out[1]
// and unbound is returned; otherwise the result is returned, to be taken apart by the caller.
Value apply_split(Value f, Value arg, Pos call_pos, Value* out);
// (unsensitize (bp (sensitize y))) for backpropagator code (Op::BackCall), skipped for a zero y;
// halves into out as for apply_split.
// With `three`, out (of three) gets f̄ and the two parts of x̄ (a pair).
// (`record` false: a raw backpropagator bp runs without a call record of its own, as a link of
// the chain whose record is the innermost one: BackChainLink, eval.cpp)
Value back_call(Value bp, Value y, Value* out, Pos pos, bool three = false, bool record = true);
// Fills an error's location (when missing) and call trace from this thread's call records.
// Call where the error is caught, before evaluating anything else.
void attach_trace(Error& e, long base = 0);  // (the calls above depth `base` only)
// Frees this thread's call records (when an evaluation thread ends).
void release_call_records();
// Forgets which backpropagator the meter last measured (an evaluation starts afresh).
void forget_retained_note();
// The meter's retained bytes: the bytes reachable from a backpropagator a program calls (its tape),
// measured once for each backpropagator, into work.retained_peak.
void note_retained(Value bp);
Value run_toplevel(Interp& in, const TopLevel& t);
void compile(Lambda* lam);
Value closure_of(Lambda* lam, const Value* env);

// ---- the pipeline: read, expand, evaluate (interp.cpp) ----
// Runs every form of `text`; calls `on_value` for each non-definition expression's value.
struct RunOptions {
  bool prelude = false;
  std::string dir;
  bool untimed = false;  // (not reported by VLAD_TIME_FORMS: predefine_procedures' runs)
};
void run_text(Interp& in, const std::string& text, const char* file, const RunOptions& opt,
              const std::function<void(Value, Pos)>& on_value);
// Runs one top-level form (a definition, an expression, an include) as run_text does.
void run_form(Interp& in, Sx* form, const RunOptions& opt, const std::function<void(Value, Pos)>& on_value);
// When form is (include "name"): true, with `path` the file it names (searched from opt.dir, the
// including file's directory, none when empty; then each -I directory; then the current one),
// now marked included, or empty when it was included before. Throws for a malformed include or
// a file not found.
bool include_target(Interp& in, Sx* form, const RunOptions& opt, std::string& path);
std::string dir_of(const std::string& path);
// The file (include "name") names: name.vlad, or name when it has an extension, in `dir` (the
// including file's directory; none when empty), then each -I directory, then the current one.
std::string find_include(Interp& in, const std::string& name, const std::string& dir, Pos pos);
// Top-level definitions are mutually recursive, as if the program were one letrec (SPEC §2): an
// expression may call a procedure defined further down. Before a program's forms run in order,
// this makes the first definition of each procedure (a define of a lambda) whose name is not
// defined yet; it is made again in its turn. (A failing one is left to that turn to report.)
void predefine_procedures(Interp& in, const gc_vector<TopForm>& forms, const RunOptions& opt);
std::string read_file(const std::string& path);

}  // namespace vlad
