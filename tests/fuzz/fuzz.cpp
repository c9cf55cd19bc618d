// fuzz.cpp — a mutation fuzzer for the reader, expander and evaluator (SPEC §8: no input crashes
// the interpreter). It reads the given VLAD files as a corpus and, ITERATIONS times, mutates one of
// them (delete / duplicate / swap a character or a token, insert a parenthesis or a token from a
// small dictionary, wrap tokens in or strip a pair of parentheses, change a digit, truncate,
// splice two files; then, 60% of the time, rebalance the parentheses so that the text gets past
// the reader) and runs the result — as a program or, half the time, through the `--check`
// driver, which goes on after an error — in this one
// process through the internal API, as the `vlad` program does: every evaluation on the big
// evaluation stack, errors caught as vlad::Error. A fresh interpreter is made every 100
// iterations; a watchdog interrupts runs after 200 ms; output goes to a null stream.
//
//   build/fuzz [--seed S] ITERATIONS FILE...    fuzz (default seed 1)
//   build/fuzz --replay FILE                     run one input the same way (for minimising)
//   build/fuzz --diff [--seed S] [--from N] ITERATIONS FILE...
//   build/fuzz --emit DIR [--seed S] ITERATIONS   write the generated programs to DIR/pN.vlad
//                                                (to compare two builds of vlad on them)
//       differential: each input (half of them mutated corpus files, half random programs from
//       a small generator of arithmetic, lists, closures, loops and AD calls) runs in two
//       interpreters, one interpreting only and one compiling every body to native code on its
//       first run; the printed values, output and error reports must be identical. A run the
//       watchdog interrupts is not compared, and both interpreters are made afresh after it.
//       --from N replays a difference found at iteration N: the programs before N's block of
//       100 (the interpreters are made afresh every 100) are made but not run. The native
//       interpreter's threshold alternates 1, 2 with each one made (interrupts make more):
//       FUZZ_THRESHOLD=1 or 2 fixes it.
// With FUZZ_VERBOSE set in the environment, each iteration's outcome is printed; with FUZZ_GDB
// set, a hang or a crash prints the threads' backtraces (gdb).
//
// Before each run the input is written to $TMPDIR/vlad-fuzz-last.vlad (or /tmp/...), so after a
// crash it is there; a crash signal also prints the iteration. Exit status: 0 when nothing
// crashed, 1 if some run threw something other than vlad::Error or hung, and the signal's
// status on a crash.
#include <signal.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gc/gc.h>

#include "eval/exec.hpp"
#include "eval/interp.hpp"
#include "eval/runner.hpp"
#include "values/error.hpp"

using namespace vlad;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kFreshEvery = 100;
auto kSoftLimit = std::chrono::milliseconds(200);  // then interrupt (repeatedly); 50 ms in --diff mode
constexpr auto kHardLimit = std::chrono::seconds(30);        // then report a hang and abort
constexpr long kDepthLimit = 100000;

std::string last_path;
char last_path_c[4096];
volatile long current_iteration = -1;
bool gdb_on_failure = false;

// ---- watchdog ----
std::mutex mu;
Interp* armed = nullptr;
Clock::time_point started;
bool stop_watchdog = false;

void watchdog() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard<std::mutex> lock(mu);
    if (stop_watchdog) return;
    if (!armed) continue;
    auto t = Clock::now() - started;
    // Set repeatedly: the interpreter clears the flag when it throws, and --check goes on to the
    // next form after an error.
    if (t >= kSoftLimit) armed->interrupt = true;
    if (t >= kHardLimit) {
      fprintf(stderr, "\nHANG: iteration %ld did not stop %lld s after an interrupt; input in %s\n",
              (long)current_iteration, (long long)std::chrono::duration_cast<std::chrono::seconds>(kHardLimit).count(),
              last_path.c_str());
      fflush(stderr);
      if (gdb_on_failure) {  // show where it is stuck
        std::string cmd = "gdb -p " + std::to_string(getpid()) + " -batch -ex 'thread apply all bt 40' 1>&2";
        int rc = system(cmd.c_str());
        (void)rc;
      }
      _exit(3);
    }
  }
}

void arm(Interp* in) {
  std::lock_guard<std::mutex> lock(mu);
  in->interrupt = false;
  started = Clock::now();
  armed = in;
}
void disarm(Interp* in) {
  std::lock_guard<std::mutex> lock(mu);
  armed = nullptr;
  in->interrupt = false;
}

// ---- crash reporting ----
char altstack[1 << 16];

void on_crash(int sig) {
  char buf[256];
  int n = snprintf(buf, sizeof buf, "\nCRASH: signal %d (%s) at iteration %ld; input in %s\n", sig,
                   strsignal(sig), (long)current_iteration, last_path_c);
  if (n > 0) { ssize_t r = write(2, buf, (size_t)n); (void)r; }
  if (gdb_on_failure) {  // show where it crashed
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    pid_t child = fork();
    if (child == 0) {
      dup2(2, 1);
      execlp("gdb", "gdb", "-p", pid, "-batch", "-ex", "thread apply all bt 40", (char*)nullptr);
      _exit(127);
    }
    if (child > 0) waitpid(child, nullptr, 0);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_crash_handlers() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(s, &sa, nullptr);
}

// An alternate signal stack for the evaluation thread, so a stack overflow is reported too.
void use_altstack() {
  stack_t ss;
  ss.ss_sp = altstack;
  ss.ss_size = sizeof altstack;
  ss.ss_flags = 0;
  sigaltstack(&ss, nullptr);
}

struct NullBuf : std::streambuf {
  int overflow(int c) override { return c == EOF ? 0 : c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    exit(2);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void save_last(const std::string& text) {
  int fd = open(last_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = write(fd, text.data() + off, text.size() - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  close(fd);
}


// ---- mutations ----
struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t s) : g(s) {}
  size_t below(size_t n) { return n ? (size_t)(g() % n) : 0; }
  bool chance(int pct) { return (int)below(100) < pct; }
};

struct Span { size_t b, e; };

std::vector<Span> tokenize(const std::string& s) {
  std::vector<Span> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (isspace((unsigned char)c)) { i++; continue; }
    if (c == ';') { while (i < s.size() && s[i] != '\n') i++; continue; }
    if (c == '(' || c == ')' || c == '\'') { out.push_back({i, i + 1}); i++; continue; }
    if (c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, s.size());
      out.push_back({i, j});
      i = j;
      continue;
    }
    size_t j = i;
    while (j < s.size() && !isspace((unsigned char)s[j]) && s[j] != '(' && s[j] != ')' && s[j] != ';' && s[j] != '"') j++;
    out.push_back({i, j});
    i = j;
  }
  return out;
}

const char* dictionary[] = {
    "(", ")", "'", "0", "1", "-1", "0.5", "1e308", "-1e-308", "+inf", "#t", "#f", "'()", "\"s\"", "===>",
    "#|", "|#", "#;", ".", "x", "f", "lambda", "define", "let", "let*", "letrec", "if", "cond", "else",
    "and", "or", "begin", "quote", "cons", "cons*", "list", "car", "cdr", "+", "-", "*", "/", "sqrt",
    "exp", "log", "sin", "atan", "expt", "tanh", "=", "<", "zero", "plus", "perturb", "unperturb",
    "bundle", "primal", "tangent", "sensitize", "unsensitize", "*j", "*j-inverse", "j*", "write",
    "display", "error", "map", "iota", "reduce", "fold", "derivative", "gradient", "gradient-F",
    "jacobian-R", "hessian", "vjp", "directional-derivative", "if-procedure", "real", "read-real",
    "(lambda (x) x)", "(lambda (x y) (* x y))", "(*j (lambda (x) x))", "(j* car)", "(*j *j)",
    "(zero (lambda (x) x))", "(plus 1 2)", "(perturb 1)", "(sensitize 1)", "(*j 1)",
    "(bundle 1 (perturb 1))", "(iota 1000)", "(error \"e\")",
};

std::string mutate_once(const std::string& s, const std::vector<std::string>& corpus, Rng& r) {
  std::string t = s;
  switch (r.below(15)) {
    case 0:  // delete a character
      if (!t.empty()) t.erase(r.below(t.size()), 1);
      break;
    case 1:  // duplicate a character
      if (!t.empty()) { size_t i = r.below(t.size()); t.insert(i, 1, t[i]); }
      break;
    case 2:  // swap two characters (often adjacent)
      if (t.size() > 1) {
        size_t i = r.below(t.size() - 1);
        size_t j = r.chance(50) ? i + 1 : r.below(t.size());
        std::swap(t[i], t[j]);
      }
      break;
    case 3: case 4: case 5: {  // token operations
      auto tk = tokenize(t);
      if (tk.empty()) break;
      Span a = tk[r.below(tk.size())];
      std::string at = t.substr(a.b, a.e - a.b);
      int op = (int)r.below(3);
      if (op == 0) t.erase(a.b, a.e - a.b);
      else if (op == 1) t.insert(a.e, " " + at);
      else {
        Span b = tk[r.below(tk.size())];
        if (b.b < a.b) std::swap(a, b);
        if (a.e <= b.b) {
          std::string bt = t.substr(b.b, b.e - b.b);
          at = t.substr(a.b, a.e - a.b);
          t = t.substr(0, a.b) + bt + t.substr(a.e, b.b - a.e) + at + t.substr(b.e);
        }
      }
      break;
    }
    case 6:  // insert a parenthesis
      t.insert(r.below(t.size() + 1), 1, r.chance(50) ? '(' : ')');
      break;
    case 7: {  // change a digit
      std::vector<size_t> digits;
      for (size_t i = 0; i < t.size(); i++) if (isdigit((unsigned char)t[i])) digits.push_back(i);
      if (!digits.empty()) {
        size_t i = digits[r.below(digits.size())];
        static const char repl[] = "0123456789.-e+";
        t[i] = repl[r.below(sizeof repl - 1)];
        if (r.chance(10)) t.insert(i, "99999");
      }
      break;
    }
    case 8:  // truncate
      if (!t.empty()) t.resize(r.below(t.size()));
      break;
    case 9: case 10: {  // splice: a prefix of this text and a suffix of another file
      const std::string& o = corpus[r.below(corpus.size())];
      size_t i = r.below(t.size() + 1), j = r.below(o.size() + 1);
      t = t.substr(0, i) + o.substr(j);
      break;
    }
    case 13: {  // wrap a run of tokens in parentheses
      auto tk = tokenize(t);
      if (tk.empty()) break;
      size_t i = r.below(tk.size()), j = std::min(tk.size() - 1, i + r.below(4));
      t.insert(tk[j].e, ")");
      t.insert(tk[i].b, "(");
      break;
    }
    case 14: {  // remove a matching pair of parentheses
      auto tk = tokenize(t);
      std::vector<size_t> opens;
      std::vector<std::pair<size_t, size_t>> pairs;
      for (const Span& sp : tk) {
        if (t[sp.b] == '(' && sp.e == sp.b + 1) opens.push_back(sp.b);
        else if (t[sp.b] == ')' && !opens.empty()) { pairs.push_back({opens.back(), sp.b}); opens.pop_back(); }
      }
      if (pairs.empty()) break;
      auto pr = pairs[r.below(pairs.size())];
      t.erase(pr.second, 1);
      t.erase(pr.first, 1);
      break;
    }
    default: {  // insert a token from the dictionary at a token boundary
      auto tk = tokenize(t);
      size_t at = tk.empty() ? 0 : (r.chance(50) ? tk[r.below(tk.size())].b : tk[r.below(tk.size())].e);
      const char* w = dictionary[r.below(sizeof dictionary / sizeof *dictionary)];
      t.insert(at, std::string(" ") + w + " ");
      break;
    }
  }
  return t;
}

// Makes the parentheses balance: drops unmatched ')' and closes open lists at the end (so that a
// mutated program gets past the reader more often).
std::string balance(const std::string& t) {
  std::string out;
  size_t last = 0;
  int depth = 0;
  for (const Span& sp : tokenize(t)) {
    if (sp.e != sp.b + 1) continue;
    if (t[sp.b] == '(') depth++;
    else if (t[sp.b] == ')') {
      if (depth == 0) { out += t.substr(last, sp.b - last); last = sp.e; }
      else depth--;
    }
  }
  out += t.substr(last);
  if (depth > 0) out += "\n" + std::string(depth, ')');
  return out;
}

// ---- running one input ----
enum class Outcome { Completed, Error, Other };

Outcome run_one(Interp* in, const std::string& text, const std::string& dir, bool check_mode, std::string& what,
                std::ostream* capture = nullptr) {
  Outcome out = Outcome::Completed;
  std::streambuf* saved = capture ? std::cout.rdbuf(capture->rdbuf()) : nullptr;
  arm(in);
  try {
    run_on_big_stack(in, [&] {
      use_altstack();
      if (check_mode) {
        std::string report;
        CheckResult r = check_text(*in, text, "<fuzz>", dir, [&](const std::string& t) { report += t + "\n"; });
        if (r.failed) out = Outcome::Error;
        if (capture) *capture << report;
      } else {
        RunOptions opt;
        opt.dir = dir;
        run_text(*in, text, "<fuzz>", opt, [](Value v, Pos) { std::cout << write_string(v) << "\n"; });
      }
    });
  } catch (const Error& e) {
    out = Outcome::Error;
    what = e.what();
    std::string report = e.report();  // exercise the trace formatting too
    if (capture) *capture << "error: " << report << "\n";
  } catch (const std::exception& e) {
    out = Outcome::Other;
    what = std::string("non-vlad exception: ") + e.what();
  } catch (...) {
    out = Outcome::Other;
    what = "unknown exception";
  }
  disarm(in);
  if (capture) std::cout.rdbuf(saved);
  return out;
}

// ---- random programs (differential mode) ----
struct Gen {
  Rng& r;
  int fresh = 0;
  explicit Gen(Rng& rng) : r(rng) {}
  std::string var() { return "v" + std::to_string(fresh++); }
  std::string real() {
    static const char* ks[] = {"0", "1", "2", "-1", "0.5", "3.25", "-2.5", "10", "1e-3", "7"};
    return ks[r.below(sizeof ks / sizeof *ks)];
  }
  std::string expr(std::vector<std::string>& vs, int d) {
    if (d <= 0 || r.chance(20)) return vs.empty() || r.chance(30) ? real() : vs[r.below(vs.size())];
    switch (r.below(14)) {
      case 0: case 1: case 2: {
        static const char* ops[] = {"+", "-", "*", "/", "max", "min", "atan", "expt"};
        return std::string("(") + ops[r.below(r.chance(70) ? 3 : 8)] + " " + expr(vs, d - 1) + " " + expr(vs, d - 1) + ")";
      }
      case 3: {
        static const char* ops[] = {"sin", "cos", "exp", "sqrt", "abs", "tanh", "log"};
        return std::string("(") + ops[r.below(7)] + " " + expr(vs, d - 1) + ")";
      }
      case 4: case 5: {
        static const char* cmp[] = {"<", ">", "=", "<=", ">="};
        return std::string("(if (") + cmp[r.below(5)] + " " + expr(vs, d - 1) + " " + expr(vs, d - 1) + ") " +
               expr(vs, d - 1) + " " + expr(vs, d - 1) + ")";
      }
      case 6: {
        std::string v = var(), e = expr(vs, d - 1);
        vs.push_back(v);
        std::string b = expr(vs, d - 1);
        vs.pop_back();
        return "(let ((" + v + " " + e + ")) " + b + ")";
      }
      case 7: return "(car (cons " + expr(vs, d - 1) + " " + expr(vs, d - 1) + "))";
      case 8: return "(cdr (cons " + expr(vs, d - 1) + " " + expr(vs, d - 1) + "))";
      case 9: {
        std::string v = var();
        vs.push_back(v);
        std::string b = expr(vs, d - 1);
        vs.pop_back();
        return "((lambda (" + v + ") " + b + ") " + expr(vs, d - 1) + ")";
      }
      case 10: {  // a loop
        std::string i = var(), acc = var();
        std::string n = std::to_string(1 + r.below(10));
        vs.push_back(i);
        vs.push_back(acc);
        std::string step = expr(vs, d - 1);
        vs.pop_back();
        vs.pop_back();
        return "(let loop ((" + i + " 0) (" + acc + " " + expr(vs, d - 1) + ")) (if (< " + i + " " + n + ") (loop (+ " +
               i + " 1) " + step + ") " + acc + "))";
      }
      case 11: {  // a list reduced
        return "((reduce + 0) (map (lambda (q) (* q " + expr(vs, d - 1) + ")) (list " + expr(vs, d - 1) + " " +
               expr(vs, d - 1) + " " + real() + ")))";
      }
      case 12: {  // a derivative of a function of one of the variables
        std::string v = var();
        vs.push_back(v);
        std::string b = expr(vs, d - 1);
        vs.pop_back();
        static const char* ds[] = {"derivative", "gradient", "derivative-F", "derivative-R"};
        return std::string("((") + ds[r.below(4)] + " (lambda (" + v + ") " + b + ")) " + expr(vs, d - 1) + ")";
      }
      default: return "(if (null? (cdr (list " + expr(vs, d - 1) + "))) " + expr(vs, d - 1) + " " + expr(vs, d - 1) + ")";
    }
  }
  std::string program() {
    std::string out;
    std::vector<std::string> vs = {"x"};
    int nf = 1 + (int)r.below(3);
    for (int k = 0; k < nf; k++) out += "(define (f" + std::to_string(k) + " x) " + expr(vs, 2 + (int)r.below(4)) + ")\n";
    for (int k = 0; k < nf; k++) {
      std::string f = "f" + std::to_string(k), a = real();
      out += "(" + f + " " + a + ")\n";
      switch (r.below(5)) {
        case 0: out += "((derivative " + f + ") " + a + ")\n"; break;
        case 1: out += "((gradient " + f + ") " + a + ")\n"; break;
        case 2: out += "((derivative (derivative " + f + ")) " + a + ")\n"; break;
        case 3: out += "((gradient (gradient " + f + ")) " + a + ")\n"; break;
        default: out += "(map " + f + " (list 1 2 3))\n"; break;
      }
    }
    return out;
  }
};

Interp* fresh_interp() {
  Interp* in = nullptr;
  run_on_big_stack(nullptr, [&] { in = new Interp(); });
  in->depth_limit = kDepthLimit;
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  long iterations = -1;
  std::string replay, emit;
  bool diff = false;
  long from = 0;  // --from N (with --diff): only the programs from N's block of kFreshEvery run
  std::vector<std::string> files;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
    else if (a == "--diff") {
      diff = true;
      kSoftLimit = std::chrono::milliseconds(50);
    }
    else if (a == "--replay" && i + 1 < argc) replay = argv[++i];
    else if (a == "--from" && i + 1 < argc) from = atol(argv[++i]);
    else if (a == "--emit" && i + 1 < argc) emit = argv[++i];
    else if (iterations < 0 && replay.empty() && !a.empty() && isdigit((unsigned char)a[0])) iterations = atol(a.c_str());
    else files.push_back(a);
  }
  if (!emit.empty() && iterations >= 0) {
    Rng r(seed);
    Gen gen(r);
    for (long it = 0; it < iterations; it++) {
      std::ofstream out(emit + "/p" + std::to_string(it) + ".vlad");
      out << gen.program();
      if (!out) {
        fprintf(stderr, "fuzz: cannot write to %s\n", emit.c_str());
        return 2;
      }
    }
    return 0;
  }
  if (replay.empty() && (iterations < 0 || files.empty())) {
    fprintf(stderr, "usage: fuzz [--seed S] [--diff [--from N]] ITERATIONS FILE...\n       fuzz --replay FILE\n");
    return 2;
  }
  gdb_on_failure = getenv("FUZZ_GDB") != nullptr;
  const char* tmpdir = getenv("TMPDIR");
  last_path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/vlad-fuzz-last.vlad";
  snprintf(last_path_c, sizeof last_path_c, "%s", last_path.c_str());

  // read-real must not wait for a terminal; program output goes nowhere.
  if (!freopen("/dev/null", "r", stdin)) return 2;
  NullBuf nullbuf;
  std::streambuf* saved_out = std::cout.rdbuf(&nullbuf);
  auto say = [&](const std::string& s) {
    std::cout.rdbuf(saved_out);
    std::cout << s << std::flush;
    std::cout.rdbuf(&nullbuf);
  };

  Interp* in = fresh_interp();
  if (diff) in->jit = false;
  // The collector must have been set up before the evaluation thread was created (without
  // all-interior-pointers): set up late, it kept the default, or was switched under its own feet.
  if (GC_get_all_interior_pointers()) {
    fprintf(stderr, "fuzz: the collector was set up after its first use (all-interior-pointers on)\n");
    return 3;
  }
  install_crash_handlers();
  std::thread dog(watchdog);

  int status = 0;
  if (diff && replay.empty()) {
    // the second interpreter compiles every body on its first run, or (every other one) on its
    // second, after the interpreter has recorded at each call the kinds of callee it met
    // (Instr::seen), so that later calls of other kinds take native code's ways out
    auto native = [] {
      static int made = 0;
      Interp* n = fresh_interp();
      n->jit = jit_supported();
      n->jit_threshold = made++ % 2 ? 2 : 1;
      if (const char* t = getenv("FUZZ_THRESHOLD")) n->jit_threshold = (uint32_t)atoi(t);  // (a replay with --from)
      return n;
    };
    Interp* nat = native();
    std::vector<std::string> corpus, dirs;
    for (const auto& f : files) { corpus.push_back(slurp(f)); dirs.push_back(dir_of(f)); }
    Rng r(seed);
    Gen gen(r);
    long same = 0, skipped = 0, differ = 0, generated = 0;
    auto t0 = Clock::now();
    say("fuzz --diff: seed " + std::to_string(seed) + ", " + std::to_string(iterations) + " programs; native tier " +
        (jit_supported() ? "on" : "NOT SUPPORTED here") + "\n");
    for (long it = 0; it < iterations; it++) {
      current_iteration = it;
      if (it > 0 && it % kFreshEvery == 0) {
        destroy_interp(in);
        destroy_interp(nat);
        in = fresh_interp();
        in->jit = false;
        nat = native();
      }
      std::string text, dir = ".";
      bool check_mode = false;
      if (r.chance(75)) {
        text = gen.program();
        generated++;
      } else {
        size_t k = r.below(corpus.size());
        text = corpus[k];
        dir = dirs[k];
        int nmut = 1 + (int)r.below(3);
        for (int m = 0; m < nmut; m++) text = mutate_once(text, corpus, r);
        text = balance(text);
        check_mode = r.chance(50);
      }
      // (--from: the programs before N's block are made, as the generator's state needs, not run;
      // the interpreters start afresh at that block, as they did then, unless an interrupt reset
      // them in between)
      if (it < from - from % kFreshEvery) continue;
      save_last(text);
      std::ostringstream o1, o2;
      std::string w1, w2;
      Outcome a = run_one(in, text, dir, check_mode, w1, &o1);
      Outcome b = run_one(nat, text, dir, check_mode, w2, &o2);
      // a run the watchdog interrupted stopped at a moment that differs between the two
      bool timed = o1.str().find("interrupted") != std::string::npos || o2.str().find("interrupted") != std::string::npos;
      if (timed) {
        // Stopped at different points, the two may now hold different definitions (a program
        // redefines `map`, say, before its interruption in one run and not in the other): both
        // start again.
        skipped++;
        destroy_interp(in);
        destroy_interp(nat);
        in = fresh_interp();
        in->jit = false;
        nat = native();
      } else if (a == b && o1.str() == o2.str()) same++;
      else {
        differ++;
        status = 1;
        std::string keep = last_path + ".diff" + std::to_string(it);
        std::rename(last_path.c_str(), keep.c_str());
        say("\nDIFFERENCE at iteration " + std::to_string(it) + " (input kept in " + keep + ")\n--- interpreted:\n" +
            o1.str().substr(0, 2000) + "\n--- native:\n" + o2.str().substr(0, 2000) + "\n");
        if (differ >= 5) break;
      }
      if ((it + 1) % 1000 == 0 || it + 1 == iterations) {
        char line[256];
        if (getenv("FUZZ_HEAP")) GC_gcollect();
        snprintf(line, sizeof line, "fuzz --diff: %ld/%ld  same %ld  differ %ld  interrupted (skipped) %ld  %.1f s  heap %zu MiB (in use %zu MiB)\n",
                 it + 1, iterations, same, differ, skipped, std::chrono::duration<double>(Clock::now() - t0).count(),
                 GC_get_heap_size() >> 20, (GC_get_heap_size() - GC_get_free_bytes()) >> 20);
        say(line);
      }
    }
    char line[320];
    snprintf(line, sizeof line,
             "fuzz --diff summary: %ld programs (%ld generated, the rest mutated), %ld the same in both tiers, %ld "
             "different, %ld interrupted\n",
             iterations, generated, same, differ, skipped);
    say(line);
  } else if (!replay.empty()) {
    std::string text = slurp(replay), what;
    for (int mode = 0; mode < 2; mode++) {
      Outcome o = run_one(in, text, dir_of(replay), mode == 1, what);
      say(std::string(mode ? "check mode: " : "run mode: ") +
          (o == Outcome::Completed ? "completed" : o == Outcome::Error ? "error: " + what : "FAILURE: " + what) + "\n");
      if (o == Outcome::Other) status = 1;
    }
  } else {
    std::vector<std::string> corpus, dirs;
    for (const auto& f : files) { corpus.push_back(slurp(f)); dirs.push_back(dir_of(f)); }
    Rng r(seed);
    bool verbose = getenv("FUZZ_VERBOSE") != nullptr;
    long n_error = 0, n_done = 0, n_other = 0, n_interrupted = 0, n_depth = 0, n_fresh = 1;
    auto t0 = Clock::now();
    say("fuzz: seed " + std::to_string(seed) + ", " + std::to_string(iterations) + " iterations over " +
        std::to_string(files.size()) + " files; current input saved to " + last_path + "\n");
    for (long it = 0; it < iterations; it++) {
      current_iteration = it;
      if (it > 0 && it % kFreshEvery == 0) {
        destroy_interp(in);
        in = fresh_interp();
        n_fresh++;
      }
      size_t k = r.below(corpus.size());
      std::string text = corpus[k];
      int nmut = 1 + (int)r.below(4);
      for (int m = 0; m < nmut; m++) text = mutate_once(text, corpus, r);
      if (r.chance(60)) text = balance(text);
      bool check_mode = r.chance(50);
      save_last(text);
      std::string what;
      Outcome o = run_one(in, text, dirs[k], check_mode, what);
      if (verbose) say(std::to_string(it) + (check_mode ? " check: " : " run: ") + (o == Outcome::Completed ? "completed" : what.substr(0, 120)) + "\n");
      if (o == Outcome::Completed) n_done++;
      else if (o == Outcome::Error) {
        n_error++;
        if (what == "interrupted") n_interrupted++;
        if (what.find("recursion depth") != std::string::npos) n_depth++;
      } else {
        n_other++;
        status = 1;
        std::string keep = last_path + "." + std::to_string(it);
        save_last(text);
        std::rename(last_path.c_str(), keep.c_str());
        say("\nFAILURE at iteration " + std::to_string(it) + ": " + what + " (input kept in " + keep + ")\n");
      }
      if ((it + 1) % 1000 == 0 || it + 1 == iterations) {
        double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        char line[256];
        snprintf(line, sizeof line, "fuzz: %ld/%ld  errors %ld (interrupted %ld, depth %ld)  completed %ld  %.1f s\n",
                 it + 1, iterations, n_error, n_interrupted, n_depth, n_done, secs);
        say(line);
      }
    }
    char line[320];
    snprintf(line, sizeof line,
             "fuzz summary: %ld iterations, %ld raised errors (%ld interrupted after %lld ms, %ld depth limit), "
             "%ld completed, %ld other failures, %ld interpreters; no crash\n",
             iterations, n_error, n_interrupted, (long long)kSoftLimit.count(), n_depth, n_done, n_other, n_fresh);
    say(line);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop_watchdog = true;
  }
  dog.join();
  std::cout.rdbuf(saved_out);
  return status;
}
