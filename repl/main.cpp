// main.cpp — the `vlad` program (SPEC §6): REPL, script runner, -e, --check, --meter.
// Every evaluation runs on a large dedicated stack; errors print as file:line:col plus a trace.
#include <editline/readline.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>

#include "../src/eval/exec.hpp"
#include "../src/eval/runner.hpp"
#include "../src/prims/prims.hpp"

using namespace vlad;

#ifndef VLAD_VERSION
#define VLAD_VERSION "0.1.0"
#endif

namespace {

std::atomic<Interp*> interruptible{nullptr};

// Ctrl-C while no evaluation runs (at the prompt): the line being typed is dropped.
volatile sig_atomic_t prompt_interrupted = 0;

// What Ctrl-C does outside an evaluation: at the REPL, drop the line being typed; elsewhere
// (vlad - reading its program, between a --check's forms) what it does to any program.
bool at_repl = false;
// Under --check, the first Ctrl-C interrupts the running check (which fails), and the next ends vlad.
bool checking = false;

void on_sigint(int) {
  Interp* in = interruptible.load();
  if (in) {
    in->interrupt = true;
    if (checking) signal(SIGINT, SIG_DFL);
  } else if (at_repl) {
    prompt_interrupted = 1;
  } else {
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
  }
}

const char* usage =
    "usage:\n"
    "  vlad                     interactive REPL\n"
    "  vlad FILE [ARG...]       run a program (FILE may be - for standard input)\n"
    "  vlad -e EXPR             evaluate EXPR's forms, printing their values (-e again: more)\n"
    "  vlad --check FILE...     verify every `expr ===> answer` annotation\n"
    "  vlad --meter FILE        run, then print primitive-operation counts to stderr\n"
    "  vlad --meter -e EXPR     the same for -e's expressions\n"
    "  vlad -I DIR ...          add an include directory\n"
    "  vlad --depth-limit N     maximum depth of nested non-tail calls (default 4000000)\n"
    "  vlad --heap-limit SIZE   most heap to use, e.g. 2G or 512M (default 3/4 of memory)\n"
    "  vlad --jit=on|off        compile hot code to native code (default on where supported)\n"
    "  vlad --jit-threshold N   runs of a body (within 65,536 steps) before it is compiled (default 30)\n"
    "  vlad --version | --help\n"
    "  (-- ends the options: vlad -- -odd.vlad)\n";

// "2G", "512M", "64k", "1000000" (bytes; suffixes are powers of 1024). 0 when malformed.
size_t parse_size(const std::string& s) {
  // (decimal only: strtod alone took "nan", "inf" and hexadecimal "0x1p21")
  size_t k = s.find_first_not_of("0123456789.");
  std::string number = s.substr(0, k), suffix = k == std::string::npos ? "" : s.substr(k);
  char* end = nullptr;
  double v = strtod(number.c_str(), &end);
  if (number.find_first_of("0123456789") == std::string::npos || *end || v <= 0) return 0;
  double mult = 1;
  if (suffix == "k" || suffix == "K") mult = 1024.0;
  else if (suffix == "m" || suffix == "M") mult = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "G") mult = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty()) return 0;
  double bytes = v * mult;
  // under 4 MiB: too small to start (the prelude needs ~2); over 2^60: not a size
  return bytes < (4 << 20) || bytes > std::ldexp(1.0, 60) ? 0 : (size_t)bytes;
}

// A whole positive decimal number (no trailing characters): false when `s` is not one.
bool parse_positive(const char* s, long& out) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v <= 0) return false;
  out = v;
  return true;
}

// Ends the line the program's output is in, if any: an error report on the terminal (or in a
// file of both streams) then starts at a line's start, where tools look for FILE:LINE:COL.
void end_output_line() {
  if (stdout_mid_line.exchange(false)) std::cout << "\n";
  std::cout.flush();
}

// An error report (one or more lines, with no final newline) on standard error, on lines of its own.
void report_error(const std::string& text) {
  end_output_line();
  std::cerr << text << "\n";
}

// Runs a whole program text, printing each top-level value. Returns false on error.
// `file` names the text in positions; `from_file`: it is that file's contents (not a REPL input).
// `file` is kept for good (interned, or a REPL input's name): the code's positions name it.
bool run_program(Interp& in, const std::string& text, const char* file, std::string& err, bool from_file) {
  bool ok = true;
  begin_program(in, from_file ? file : "");
  // (a Ctrl-C that came after the last evaluation's last look at the flag, as its error was on
  // its way out, is that evaluation's: it must not stop this one)
  in.interrupt = false;
  interruptible = &in;
  try {
    run_on_big_stack(&in, [&] {
      RunOptions opt;
      opt.dir = from_file ? dir_of(file) : "";  // (-e, standard input, the REPL: no including file)
      run_text(in, text, file, opt, [](Value v, Pos pos) {
        std::string shown;
        try {
          shown = write_string(v);  // (the whole text first: a value of 2^27 shared leaves is GBs)
        } catch (const std::bad_alloc&) {
          throw Error(std::string(memory_error().what()) + " (printing this expression's value)", pos);
        }
        std::cout << shown << "\n";
        stdout_mid_line.store(false, std::memory_order_relaxed);
      });
    });
  } catch (const Error& e) {
    std::cout.flush();
    err = e.report();
    ok = false;
  }
  interruptible = nullptr;
  std::cout.flush();
  return ok;
}

const char* help_text =
    "Type a VLAD expression or definition; values are printed after each form.\n"
    "Commands:\n"
    "  ,help          this text\n"
    "  ,load FILE     run a file in this session (FILE as in include: \"name\", .vlad optional)\n"
    "  ,time EXPR     evaluate EXPR and print the time it took\n"
    "  ,meter EXPR    evaluate EXPR and print its primitive-operation counts\n"
    "  ,quit          leave (Ctrl-D also works)\n"
    "Ctrl-C interrupts a running evaluation.\n";

// A REPL input's name, "<repl:N>", kept for the rest of the session (the positions of the code it
// defines name it) in blocks never freed, a few bytes each. Not interned: each is new, and an
// interned one took ~70 bytes of the table's for each line (with the history of piped lines,
// which is never written, ~130 bytes a line: 400,000 lines of `1` grew the REPL by 53 MB).
const char* input_name(int n) {
  static char* block = nullptr;
  static size_t left = 0;
  std::string s = "<repl:" + std::to_string(n) + ">";
  if (left < s.size() + 1) {
    block = static_cast<char*>(malloc(size_t(16) << 10));
    if (!block) return intern(s);
    left = size_t(16) << 10;
  }
  char* p = block;
  memcpy(p, s.c_str(), s.size() + 1);
  block += s.size() + 1;
  left -= s.size() + 1;
  return p;
}

int repl(Interp& in) {
  bool tty = isatty(0);
  std::string histfile;  // (a terminal's session only: not the lines of a piped script)
  if (const char* home = getenv("HOME"); home && tty) histfile = std::string(home) + "/.vlad_history";
  using_history();
  stifle_history(10000);  // (a long session's memory and ~/.vlad_history stay bounded)
  if (!histfile.empty()) read_history(histfile.c_str());
  if (tty) std::cout << "vlad " << VLAD_VERSION << " — ,help for help, Ctrl-D to quit" << std::endl;
  int counter = 0;
  for (;;) {
    release_grown_heap();  // (the last input's garbage, if it grew the heap: heap.cpp)
    std::string text;
    const char* prompt = "vlad> ";
    bool dropped = false;
    for (;;) {
      std::cout.flush();
      std::cerr.flush();
      prompt_interrupted = 0;
      // (from a pipe or a file: through the buffer read-real reads from too)
      char* line = nullptr;
      if (tty) {
        line = readline(prompt);
      } else {
        std::string piped;
        if (stdin_line(piped)) line = strdup(piped.c_str());
      }
      if (prompt_interrupted) {  // Ctrl-C: not the end of input; what was typed goes
        prompt_interrupted = 0;
        free(line);
        if (tty) std::cout << "\n";
        dropped = true;
        break;
      }
      if (!line) {
        if (tty) std::cout << "\n";  // (after the prompt: what follows starts a line of its own)
        if (text.empty()) {
          if (!histfile.empty()) write_history(histfile.c_str());
          return 0;
        }
        break;
      }
      text += line;
      text += "\n";
      free(line);
      if (input_complete(text)) break;  // (a command's argument too: ,time over several lines)
      prompt = "  ... ";
    }
    if (dropped) continue;
    std::string trimmed = text;
    while (!trimmed.empty() && isspace((unsigned char)trimmed.back())) trimmed.pop_back();
    trimmed.erase(0, std::min(trimmed.size(), trimmed.find_first_not_of(" \t\r\n")));
    if (trimmed.empty()) continue;
    if (tty) add_history(trimmed.c_str());  // (piped lines: never written, kept for nothing)
    std::string src = text;
    enum { Eval, Time, Meter } mode = Eval;
    const char* name = input_name(++counter);  // (each input: commands too)
    if (trimmed[0] == ',') {  // ,COMMAND [ARGUMENT]: the argument after any blanks, lines included
      size_t end = trimmed.find_first_of(" \t\r\n");
      std::string cmd = trimmed.substr(1, end == std::string::npos ? std::string::npos : end - 1);
      size_t from = end == std::string::npos ? std::string::npos : trimmed.find_first_not_of(" \t\r\n", end);
      std::string arg = from == std::string::npos ? "" : trimmed.substr(from);
      // A command's error, located at its comma like any other input's.
      auto command_error = [&](const std::string& msg) {
        Pos at{name, 1, 1};
        for (size_t k = 0; k < text.size() && isspace((unsigned char)text[k]); k++) {
          if (text[k] == '\n') at.line++, at.col = 1;
          else at.col++;
        }
        report_error(Error(msg, at).located());
      };
      if (cmd == "quit" || cmd == "q" || cmd == "help" || cmd == "h") {
        if (!arg.empty()) { command_error("," + cmd + " takes no argument, got " + arg); continue; }
        if (cmd[0] == 'q') break;
        std::cout << help_text;
        continue;
      }
      if (cmd == "load") {
        // ,load FILE: FILE as include takes it too: quoted, ".vlad" optional
        if (arg.size() >= 2 && arg.front() == '"' && arg.back() == '"') arg = arg.substr(1, arg.size() - 2);
        if (arg.empty()) { command_error(",load FILE: missing file name"); continue; }
        // (a file that is there as named; else as include finds it: the current directory, then
        // each -I directory; else the name as given, for the error)
        if (access(arg.c_str(), F_OK) != 0) {
          try {
            arg = find_include(in, arg, ".", Pos());
          } catch (const Error&) {
          }
        }
        std::string body;
        try {
          body = read_file(arg);
        } catch (const Error& e) {
          command_error(std::string(",load: ") + e.what());
          continue;
        }
        std::string err;
        if (!run_program(in, body, intern(arg), err, true)) report_error(err);
        continue;
      }
      if (cmd == "time" || cmd == "meter") {
        if (arg.empty()) { command_error("," + cmd + " EXPR: missing expression"); continue; }
        mode = cmd == "time" ? Time : Meter;
        src = arg;
      } else {
        command_error("unknown command ," + cmd + " (try ,help)");
        continue;
      }
    }
    if (mode == Meter) meter_reset(in);
    in.meter_retained = mode == Meter;
    auto t0 = std::chrono::steady_clock::now();
    std::string err;
    bool ok = run_program(in, src, name, err, false);
    auto t1 = std::chrono::steady_clock::now();
    if (!ok) report_error(err);
    if (mode == Time)
      std::cout << "; " << std::chrono::duration<double, std::milli>(t1 - t0).count() << " ms\n";
    if (mode == Meter) std::cout << meter_report(in);
  }
  if (!histfile.empty()) write_history(histfile.c_str());
  return 0;
}

}  // namespace

int run_main(int argc, char** argv) {
  // A descriptor 0, 1 or 2 the caller closed is /dev/null here: else the next file opened (the
  // prefaulter's /proc/self/maps) would take it, and `vlad -` would read that as its program.
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (n >= 0 && n != fd) close(n);  // (the lowest free descriptor: fd itself)
    }
  vlad::gc_init();  // on the main thread, before any evaluation thread exists
  std::ios::sync_with_stdio(false);
  std::vector<std::string> includes, checks;
  std::string file, expr;
  bool have_file = false, have_expr = false, meter = false, check = false, options_done = false;
  long depth_limit = 0;
  int jit = -1;  // unset: the interpreter's default
  long jit_threshold = 0;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (have_file) break;  // the rest are the program's arguments
    if (options_done) {  // (after --: a file, whatever its name)
      if (check) checks.push_back(a);
      else file = a, have_file = true;
      continue;
    }
    if (a == "--") { options_done = true; continue; }
    if (a == "--help" || a == "-h") { std::cout << usage; return 0; }
    if (a == "--version") { std::cout << "vlad " << VLAD_VERSION << "\n"; return 0; }
    if (a == "-I") {
      if (i + 1 >= argc) { std::cerr << "vlad: -I needs a directory\n" << usage; return 2; }
      includes.push_back(argv[++i]);
    } else if (a.rfind("-I", 0) == 0 && a.size() > 2) {
      includes.push_back(a.substr(2));
    } else if (a == "-e") {
      if (i + 1 >= argc) { std::cerr << "vlad: -e needs an expression\n" << usage; return 2; }
      if (have_expr) expr += "\n";  // several -e: each in turn, as lines of one program
      expr += argv[++i];
      have_expr = true;
    } else if (a == "--meter") {
      meter = true;
    } else if (a == "--depth-limit") {
      if (i + 1 >= argc || !parse_positive(argv[++i], depth_limit)) {
        std::cerr << "vlad: --depth-limit needs a positive number\n";
        return 2;
      }
    } else if (a == "--jit=on" || a == "--jit=off") {
      jit = a == "--jit=on";
      if (jit && !jit_supported()) std::cerr << "vlad: no native tier on this machine; interpreting\n";
    } else if (a == "--jit-threshold") {
      if (i + 1 >= argc || !parse_positive(argv[++i], jit_threshold) || jit_threshold > UINT32_MAX) {
        std::cerr << "vlad: --jit-threshold needs a positive number, at most 4294967295\n";
        return 2;
      }
    } else if (a == "--heap-limit") {
      size_t bytes = 0;
      if (i + 1 >= argc || !(bytes = parse_size(argv[++i]))) {
        std::cerr << "vlad: --heap-limit needs a size from 4M to 1048576T, such as 2G, 512M or 4194304\n";
        return 2;
      }
      set_heap_limit(bytes);
    } else if (a == "--check") {
      check = true;  // (the words after it are files to check, or options: no program arguments)
    } else if (a.size() > 1 && a[0] == '-') {
      std::cerr << "vlad: unknown option " << a << "\n" << usage;
      return 2;
    } else if (check) {
      checks.push_back(a);
    } else {
      file = a;
      have_file = true;
    }
  }
  if (check && have_expr) { std::cerr << "vlad: -e and --check cannot be combined\n" << usage; return 2; }
  if (check && meter) { std::cerr << "vlad: --meter and --check cannot be combined\n" << usage; return 2; }
  if (have_expr && have_file) { std::cerr << "vlad: -e and a FILE cannot be combined\n" << usage; return 2; }
  if (check && checks.empty()) { std::cerr << "vlad: --check needs at least one file\n" << usage; return 2; }
  if (meter && !have_file && !have_expr) { std::cerr << "vlad: --meter needs a file or -e EXPR\n" << usage; return 2; }

  // An interpreter with the prelude loaded and the options applied (null, with a message, if the
  // prelude fails). Starting one costs well under a millisecond.
  auto new_interp = [&]() -> Interp* {
    Interp* inp = nullptr;
    try {
      run_on_big_stack(nullptr, [&] { inp = new Interp(); });
    } catch (const Error& e) {
      std::cerr << "vlad: internal error in the prelude: " << e.report() << "\n";
      return nullptr;
    }
    inp->include_dirs = includes;
    if (depth_limit) inp->depth_limit = depth_limit;
    if (jit >= 0) inp->jit = jit && jit_supported();
    if (jit_threshold) inp->jit_threshold = (uint32_t)jit_threshold;
    inp->meter_retained = meter;
    return inp;
  };
  Interp* first = new_interp();
  if (!first) return 1;
  Interp& in = *first;
  signal(SIGINT, on_sigint);

  if (check) {
    checking = true;
    int failed = 0, passed = 0;
    for (size_t k = 0; k < checks.size(); k++) {
      const std::string& f = checks[k];
      // Each file in an interpreter of its own: its verdict does not depend on the files
      // checked before it (their definitions, the files they included).
      Interp* fresh = k == 0 ? first : new_interp();
      if (!fresh) return 1;
      Interp& in = *fresh;
      std::string text;
      try {
        text = f == "-" ? stdin_rest() : read_file(f);
      } catch (const Error& e) {  // that file's check fails; the others are checked
        report_error(f + ": FAIL: " + e.what());
        failed++;
        continue;
      }
      CheckResult r;
      try {
        begin_program(in, f == "-" ? "" : f);
        in.interrupt = false;
        interruptible = &in;
        // (each failure written when it is found: before the output of the forms after it, and
        // not lost when a second Ctrl-C ends vlad in a long check)
        run_on_big_stack(&in, [&] { r = check_text(in, text, f == "-" ? "<stdin>" : f.c_str(), f == "-" ? "" : dir_of(f), report_error); });
      } catch (const Error& e) {  // (check_text reports each form's errors itself: this is the rest)
        report_error(e.located());
        r.failed++;
      }
      interruptible = nullptr;
      passed += r.passed;
      failed += r.failed;
    }
    end_output_line();
    std::cout << passed << " passed, " << failed << " failed\n";
    return failed ? 1 : 0;
  }

  if (have_expr || have_file) {
    std::string text, name;
    if (have_expr) {
      text = expr;
      name = "<command line>";
    } else if (file == "-") {
      text = stdin_rest();
      name = "<stdin>";
    } else {
      try {
        text = read_file(file);
      } catch (const Error& e) {
        std::cerr << "vlad: " << e.what() << "\n";
        return 2;
      }
      name = file;
    }
    std::string err;
    bool ok = run_program(in, text, intern(name), err, !have_expr && file != "-");
    if (!ok) report_error(err);
    if (meter) std::cerr << meter_report(in);
    return ok ? 0 : 1;
  }
  at_repl = true;
  return repl(in);
}

int main(int argc, char** argv) {
  int rc = run_main(argc, argv);
  // Output that could not be written (a full disk, a closed pipe's reader gone): not a success.
  std::cout.flush();
  if (!std::cout) {
    if (rc == 0)  // (else reported: a print that failed raised its error)
      std::cerr << "vlad: error writing standard output (is the disk full, or the reader gone?)\n";
    return rc ? rc : 1;
  }
  return rc;
}
