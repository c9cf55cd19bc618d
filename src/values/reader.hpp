// reader.hpp — S-expressions with a source position on every pair and atom.
// The reader knows nothing of VLAD's forms; `===>` annotations are recorded beside each top-level form.
#pragma once
#include <string>
#include <vector>
#include "error.hpp"

namespace vlad {

// A syntax object: what the reader produces and the expander consumes.
struct Sx {
  enum Type { Real, Bool, Str, Sym, Nil, Pair } type;
  Pos pos;
  double real = 0;
  bool boolean = false;
  const char* text = nullptr;  // symbol name (interned) or string contents
  size_t len = 0;              // string length
  Sx* car = nullptr;
  Sx* cdr = nullptr;
};

// One top-level form and, when `===>` followed it, the expected answer.
struct TopForm {
  Sx* form;
  Sx* expected = nullptr;
  Pos arrow;
  // (read_program with `recover`) The reader's error in this form or in its answer, if any.
  const char* error = nullptr;
  Pos error_pos;
};

// Reads every form of `text`; `file` names it in positions, which keep the pointer: a string kept
// for good (interned: "<prelude>" and "<rules>" are known by their interned address; or a REPL
// input's name, repl/main.cpp, new for each input and not interned, to keep the table small).
// Throws vlad::Error on malformed input, unless `recover` (--check, where each form is checked alone): then a form, or an answer, that
// cannot be read is recorded in its TopForm (form () when the form itself), and reading goes on
// after its brackets close; only brackets left open to the end of the text still throw.
gc_vector<TopForm> read_program(const std::string& text, const char* file, bool recover = false);

// The top-level datums of `text` found by their brackets alone, without reading them (the
// prelude's definitions, each read when first named: interp.cpp): where each begins and ends, and
// its first line. Throws on brackets left open.
struct DatumText {
  size_t begin, end;
  int line;
};
std::vector<DatumText> top_level_datums(const std::string& text);

// A numeral as the reader reads one (#b #o #d #x prefixes, +inf, ...): false if `t` is not one.
bool parse_numeral(const std::string& t, double& out);

// True when `text` holds a complete sequence of forms (the REPL asks before reading on).
bool input_complete(const std::string& text);

// Helpers over syntax objects.
Sx* sx_sym(const char* name, Pos p);
Sx* sx_cons(Sx* a, Sx* b, Pos p);
Sx* sx_nil(Pos p);
bool sx_is_sym(const Sx* s, const char* name);  // name must be interned
std::string sx_to_string(const Sx* s);
Value sx_to_value(const Sx* s);  // for quote; throws on symbols

}  // namespace vlad
