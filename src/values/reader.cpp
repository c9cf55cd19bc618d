// reader.cpp — the lexer and reader for VLAD source text.
// Numerals with #b #o #d #x prefixes, strings, `'`, comments `;` `#| |#` `#;`, and `===>` annotations.
#include "reader.hpp"
#include "../eval/interp.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vlad {

Sx* sx_new(Sx::Type t, Pos p) {
  Sx* s = static_cast<Sx*>(gc_alloc(sizeof(Sx)));
  new (s) Sx();
  s->type = t;
  s->pos = p;
  return s;
}
Sx* sx_sym(const char* name, Pos p) {
  Sx* s = sx_new(Sx::Sym, p);
  s->text = intern(name);
  return s;
}
Sx* sx_cons(Sx* a, Sx* b, Pos p) {
  Sx* s = sx_new(Sx::Pair, p);
  s->car = a;
  s->cdr = b;
  return s;
}
Sx* sx_nil(Pos p) { return sx_new(Sx::Nil, p); }
bool sx_is_sym(const Sx* s, const char* name) { return s && s->type == Sx::Sym && s->text == name; }

namespace {

struct Reader {
  const std::string& src;
  const char* file;
  size_t i = 0;
  int line = 1, col = 1;

  Reader(const std::string& s, const char* f) : src(s), file(f) {}

  Pos pos() const { return Pos{file, line, col}; }
  bool eof() const { return i >= src.size(); }
  char peek(size_t k = 0) const { return i + k < src.size() ? src[i + k] : '\0'; }
  void advance() {
    // (a column counts characters, as editors do: a UTF-8 sequence's continuation bytes do not count)
    if (src[i] == '\n') { line++; col = 1; } else if (((unsigned char)src[i] & 0xC0) != 0x80) col++;
    i++;
  }
  [[noreturn]] void fail(const std::string& msg, Pos p) { throw Error(msg, p); }

  // A character of the source as a message shows it: printable ASCII as itself, any other byte
  // as \xNN (a message never carries a raw control byte or a piece of a UTF-8 sequence).
  static std::string shown(char c) {
    unsigned char u = (unsigned char)c;
    if (u > 0x20 && u < 0x7f) return std::string(1, c);
    char buf[8];
    snprintf(buf, sizeof buf, "\\x%02x", u);
    return buf;
  }

  static void append_utf8(std::string& out, unsigned long cp) {
    if (cp < 0x80) {
      out += (char)cp;
    } else if (cp < 0x800) {
      out += (char)(0xC0 | (cp >> 6));
      out += (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += (char)(0xE0 | (cp >> 12));
      out += (char)(0x80 | ((cp >> 6) & 0x3F));
      out += (char)(0x80 | (cp & 0x3F));
    } else {
      out += (char)(0xF0 | (cp >> 18));
      out += (char)(0x80 | ((cp >> 12) & 0x3F));
      out += (char)(0x80 | ((cp >> 6) & 0x3F));
      out += (char)(0x80 | (cp & 0x3F));
    }
  }

  // Skips whitespace and comments; `#;` skips the next datum.
  void skip() {
    for (;;) {
      if (eof()) return;
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') { advance(); continue; }
      if (c == ';') { while (!eof() && peek() != '\n') advance(); continue; }
      if (c == '#' && peek(1) == '|') {
        Pos start = pos();
        advance(); advance();
        int depth = 1;
        while (depth > 0) {
          if (eof()) fail("unterminated block comment", start);
          if (peek() == '|' && peek(1) == '#') { advance(); advance(); depth--; }
          else if (peek() == '#' && peek(1) == '|') { advance(); advance(); depth++; }
          else advance();
        }
        continue;
      }
      if (c == '#' && peek(1) == ';') {
        Pos start = pos();
        advance(); advance();
        skip();
        if (eof()) fail("#; at end of input: a datum comment needs a datum after it", start);
        read_datum();
        continue;
      }
      return;
    }
  }

  // Moves past the datum that starts here by its brackets alone, after a reader error in it
  // (--check goes on with the next form): false when its brackets do not close before the end.
  bool skip_datum_text() {
    while (!eof() && peek() == '\'') advance();
    long depth = 0;
    bool any = false;  // (at depth 0: some of an atom read)
    for (;;) {
      if (eof()) return depth == 0 && any;
      char c = peek();
      if (depth == 0 && any && delimiter(c)) return true;
      if (c == '"') {
        advance();
        while (!eof() && peek() != '"') {
          if (peek() == '\\') advance();
          if (!eof()) advance();
        }
        if (eof()) return false;
        advance();
        if (depth == 0) return true;
      } else if (c == ';') {
        while (!eof() && peek() != '\n') advance();
      } else if (c == '#' && peek(1) == '|') {
        advance(); advance();
        int nest = 1;
        while (nest > 0) {
          if (eof()) return false;
          if (peek() == '|' && peek(1) == '#') { advance(); advance(); nest--; }
          else if (peek() == '#' && peek(1) == '|') { advance(); advance(); nest++; }
          else advance();
        }
      } else if (c == '(' || c == '[') {
        depth++;
        advance();
      } else if (c == ')' || c == ']') {
        advance();
        if (depth == 0 || --depth == 0) return true;  // (depth 0: a stray closing bracket)
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        advance();
      } else {
        if (depth == 0) any = true;
        advance();
      }
    }
  }

  static bool delimiter(char c) {
    return c == '\0' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(' || c == ')' ||
           c == '[' || c == ']' || c == '"' || c == ';' || c == '\'' || c == '{' || c == '}';
  }

  // The length of the UTF-8 sequence at src[k], or 0 when it is not one.
  size_t utf8_length(size_t k) const {
    unsigned char u = (unsigned char)src[k];
    size_t n = u >= 0xC2 && u <= 0xDF ? 2 : u >= 0xE0 && u <= 0xEF ? 3 : u >= 0xF0 && u <= 0xF4 ? 4 : 0;
    if (n == 0 || k + n > src.size()) return 0;
    for (size_t j = 1; j < n; j++)
      if (((unsigned char)src[k + j] & 0xC0) != 0x80) return 0;
    return n;
  }

  // A token's characters: no control character, only whole UTF-8 sequences (a message that
  // names the token, "unbound variable NAME", never carries a raw byte).
  std::string token() {
    std::string t;
    while (!eof() && !delimiter(peek())) {
      unsigned char u = (unsigned char)peek();
      if (u < 0x20 || u == 0x7f) fail("unexpected character " + shown(peek()), pos());
      if (u >= 0x80) {
        size_t n = utf8_length(i);
        if (n == 0) fail("invalid UTF-8 byte " + shown(peek()), pos());
        if (src.compare(i, n, "\xEF\xBB\xBF") == 0) fail("unexpected byte-order mark (U+FEFF)", pos());
        for (size_t j = 0; j < n; j++) { t += peek(); advance(); }
        continue;
      }
      t += peek();
      advance();
    }
    return t;
  }

  static bool parse_radix(const std::string& s, int radix, double& out) {
    if (s.empty()) return false;
    size_t k = 0;
    bool neg = false;
    if (s[0] == '+' || s[0] == '-') { neg = s[0] == '-'; k = 1; }
    if (k >= s.size()) return false;
    double v = 0;
    for (; k < s.size(); k++) {
      int d;
      char c = s[k];
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return false;
      if (d >= radix) return false;
      v = v * radix + d;
    }
    out = neg ? -v : v;
    return true;
  }

  // Decimal numeral: [+-] digits [. digits] [e [+-] digits], at least one digit; or +inf -inf +nan.
  static bool parse_decimal(const std::string& s, double& out) {
    if (s.empty()) return false;
    char c0 = s[0];
    if (c0 != '+' && c0 != '-' && c0 != '.' && !isdigit((unsigned char)c0)) return false;  // (a name)
    if (s == "+inf" || s == "+inf.0") { out = INFINITY; return true; }
    if (s == "-inf" || s == "-inf.0") { out = -INFINITY; return true; }
    if (s == "+nan" || s == "+nan.0" || s == "-nan") { out = NAN; return true; }
    size_t k = 0, n = s.size();
    if (k < n && (s[k] == '+' || s[k] == '-')) k++;
    size_t digits = 0;
    while (k < n && isdigit((unsigned char)s[k])) { k++; digits++; }
    if (k < n && s[k] == '.') {
      k++;
      while (k < n && isdigit((unsigned char)s[k])) { k++; digits++; }
    }
    if (digits == 0) return false;
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
      k++;
      if (k < n && (s[k] == '+' || s[k] == '-')) k++;
      size_t ed = 0;
      while (k < n && isdigit((unsigned char)s[k])) { k++; ed++; }
      if (ed == 0) return false;
    }
    if (k != n) return false;
    out = strtod(s.c_str(), nullptr);
    return true;
  }

  static bool looks_numeric(const std::string& t) {
    if (t.empty()) return false;
    char c = t[0];
    if (isdigit((unsigned char)c)) return true;
    if ((c == '+' || c == '-' || c == '.') && t.size() > 1 && (isdigit((unsigned char)t[1]) || t[1] == '.')) return true;
    return false;
  }

  Sx* read_atom() {
    Pos p = pos();
    std::string t = token();
    if (t.empty()) fail("unexpected character " + shown(peek()), p);
    if (t[0] == '#') {
      // (as Scheme, in either case)
      if (t == "#t" || t == "#true" || t == "#T" || t == "#TRUE") { Sx* s = sx_new(Sx::Bool, p); s->boolean = true; return s; }
      if (t == "#f" || t == "#false" || t == "#F" || t == "#FALSE") { Sx* s = sx_new(Sx::Bool, p); s->boolean = false; return s; }
      if (t.size() >= 2) {
        int radix = 0;
        switch (t[1]) {
          case 'b': case 'B': radix = 2; break;
          case 'o': case 'O': radix = 8; break;
          case 'd': case 'D': radix = 10; break;
          case 'x': case 'X': radix = 16; break;
        }
        if (radix) {
          std::string body = t.substr(2);
          double v;
          bool ok = radix == 10 ? parse_decimal(body, v) : parse_radix(body, radix, v);
          if (!ok) fail("bad numeral " + t, p);
          Sx* s = sx_new(Sx::Real, p);
          s->real = v;
          return s;
        }
      }
      if (t == "#" && peek() == '(') fail("VLAD has no vectors: #( is not supported; use (list ...)", p);
      if (t.size() >= 2 && t[1] == '\\') fail("VLAD has no characters: " + t + " is not supported; use a string", p);
      fail("bad syntax " + t, p);
    }
    if (t[0] == '`') fail("quasiquote (`) is not supported; build the list with list and cons", p);
    if (t[0] == ',') fail("unquote (,) is not supported outside quasiquote (which VLAD does not have)", p);
    double v;
    if (parse_decimal(t, v)) {
      Sx* s = sx_new(Sx::Real, p);
      s->real = v;
      return s;
    }
    if (looks_numeric(t)) fail("bad numeral " + t, p);
    Sx* sym = sx_new(Sx::Sym, p);
    sym->text = intern(t.data(), t.size());
    return sym;
  }

  Sx* read_string() {
    Pos p = pos();
    advance();  // opening quote
    std::string out;
    for (;;) {
      if (eof()) fail("unterminated string", p);
      char c = peek();
      advance();
      if (c == '"') break;
      if (c == '\\') {
        Pos bp = Pos{file, line, col - 1};
        if (eof()) fail("unterminated string", p);
        char e = peek();
        advance();
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'a': out += '\a'; break;
          case 'b': out += '\b'; break;
          case '\\': out += '\\'; break;
          case '"': out += '"'; break;
          case 'x': case 'X': {  // \xHH; (R7RS): the character with that code point, in UTF-8
            unsigned long cp = 0;
            size_t digits = 0;
            while (!eof() && isxdigit((unsigned char)peek()) && digits < 8) {
              char h = peek();
              cp = cp * 16 + (isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
              digits++;
              advance();
            }
            if (digits == 0 || eof() || peek() != ';' || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
              fail("bad escape in string: \\x must be followed by hex digits and ';', as \\x41;", bp);
            advance();
            append_utf8(out, cp);
            break;
          }
          case ' ': case '\t': case '\n': case '\r': {
            // a line continuation (R7RS): backslash, blanks, a newline, blanks -> nothing
            size_t k = i - 1;
            while (k < src.size() && (src[k] == ' ' || src[k] == '\t' || src[k] == '\r')) k++;
            if (k >= src.size() || src[k] != '\n') fail("unknown escape \\" + shown(e) + " in string", bp);
            while (i <= k) advance();
            while (!eof() && (peek() == ' ' || peek() == '\t')) advance();
            break;
          }
          default: fail("unknown escape \\" + shown(e) + " in string (known: \\n \\t \\r \\a \\b \\\\ \\\" \\xHH;)", bp);
        }
      } else {
        out += c;
      }
    }
    Sx* s = sx_new(Sx::Str, p);
    char* buf = static_cast<char*>(gc_alloc_atomic(out.size() + 1));
    memcpy(buf, out.data(), out.size());
    buf[out.size()] = 0;
    s->text = buf;
    s->len = out.size();
    return s;
  }

  Sx* read_list(char close, Pos open) {
    Sx* head = nullptr;
    Sx** tail = &head;
    for (;;) {
      skip();
      if (eof()) fail("unbalanced parentheses: missing ')' for the list opened here", open);
      char c = peek();
      if (c == ')' || c == ']') {
        if (c != close) fail(std::string("mismatched '") + c + "'", pos());
        Pos np = pos();
        advance();
        *tail = sx_nil(head ? np : open);  // (an empty list () is where it opens, as any list)
        return head;
      }
      if (c == '.' && delimiter(peek(1))) {
        Pos dp = pos();
        if (!head) fail("unexpected '.' at the start of a list", dp);
        advance();
        skip();
        if (eof()) fail("unbalanced parentheses: missing ')' for the list opened here", open);
        if (peek() == ')' || peek() == ']') fail("expected a datum after '.'", pos());
        *tail = read_datum();
        skip();
        if (eof() || (peek() != ')' && peek() != ']')) fail("expected ')' after the datum following '.'", pos());
        if (peek() != close) fail(std::string("mismatched '") + peek() + "'", pos());
        advance();
        return head;
      }
      Pos ep = pos();
      Sx* item = read_datum();
      static const char* const annotation = intern("===>");
      if (sx_is_sym(item, annotation)) {
        // an annotation inside a list: skip the annotated answer too
        skip();
        if (!eof() && peek() != ')' && peek() != ']') read_datum();
        continue;
      }
      Sx* cell = sx_cons(item, nullptr, ep);
      *tail = cell;
      tail = &cell->cdr;
      // the first pair of a list carries the position of its open paren
      if (head == cell) cell->pos = open;
    }
  }

  unsigned datums = 0;
  Sx* read_datum() {
    skip();
    if (eof()) fail("unexpected end of input", pos());
    Pos p = pos();
    if ((++datums & 4095) == 0) poll_interrupt(p);  // (a program of megabytes: Ctrl-C works)
    char c = peek();
    if (c == '(' || c == '[') {
      advance();
      return read_list(c == '(' ? ')' : ']', p);
    }
    if (c == ')' || c == ']') fail(std::string("unbalanced parentheses: unexpected '") + c + "'", p);
    if (c == '{' || c == '}') fail(std::string("unexpected '") + c + "': lists are written with ( ) or [ ]", p);
    if (c == '\'') {
      advance();
      skip();
      if (eof()) fail("quote at end of input", p);
      Sx* d = read_datum();
      return sx_cons(sx_sym("quote", p), sx_cons(d, sx_nil(p), p), p);
    }
    if (c == '"') return read_string();
    return read_atom();
  }
};

}  // namespace

std::vector<DatumText> top_level_datums(const std::string& text) {
  Reader r(text, nullptr);
  std::vector<DatumText> out;
  for (;;) {
    r.skip();
    if (r.eof()) return out;
    DatumText d{r.i, 0, r.line};
    if (!r.skip_datum_text()) throw Error("unbalanced parentheses: missing ')'", Pos{nullptr, d.line, 1});
    d.end = r.i;
    out.push_back(d);
  }
}

bool parse_numeral(const std::string& t, double& out) {
  if (t.size() > 2 && t[0] == '#') {
    switch (t[1]) {
      case 'b': case 'B': return Reader::parse_radix(t.substr(2), 2, out);
      case 'o': case 'O': return Reader::parse_radix(t.substr(2), 8, out);
      case 'd': case 'D': return Reader::parse_decimal(t.substr(2), out);
      case 'x': case 'X': return Reader::parse_radix(t.substr(2), 16, out);
    }
    return false;
  }
  return Reader::parse_decimal(t, out);
}

gc_vector<TopForm> read_program(const std::string& text, const char* file, bool recover) {
  Reader r(text, file);
  // A UTF-8 byte-order mark (some editors save one) is not part of the program; nor is a first
  // line starting with #! (an executable script's interpreter line).
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) r.i = 3;
  // (and, recovering, the rest of an unreadable answer's line: `car ===> #<procedure car>` is one
  // failed check, not a second form `car>`)
  auto rest_of_line = [&]() {
    while (!r.eof() && r.peek() != '\n') r.advance();
  };
  if (text.compare(r.i, 2, "#!") == 0) rest_of_line();
  gc_vector<TopForm> out;
  const char* arrow = intern("===>");
  auto note = [&](TopForm& t, const Error& e) {
    char* msg = static_cast<char*>(gc_alloc_atomic(strlen(e.what()) + 1));
    strcpy(msg, e.what());
    t.error = msg;
    t.error_pos = e.pos;
  };
  // (recover) Records e in t, and moves the reader from `start` past the datum there; false when
  // that datum never ends (an open list, string or block comment): the rest of the input is that
  // datum, and the forms read before it are still checked.
  auto recovered = [&](TopForm& t, const Error& e, size_t start, int line, int col) {
    if (!recover) throw e;
    r.i = start;
    r.line = line;
    r.col = col;
    note(t, e);
    if (r.skip_datum_text()) return true;
    r.i = text.size();
    return false;
  };
  for (;;) {
    r.skip();
    if (r.eof()) break;
    size_t start = r.i;
    int line = r.line, col = r.col;
    Sx* d;
    try {
      d = r.read_datum();
    } catch (const Error& e) {
      // (an error with no position, the heap limit reached while reading a datum of megabytes:
      // located at that datum)
      Error at = e.pos.file ? e : Error(e.what(), Pos{r.file, line, col});
      out.push_back(TopForm{sx_nil(r.pos()), nullptr, Pos(), nullptr, Pos()});
      if (!recovered(out.back(), at, start, line, col)) break;
      continue;
    }
    if (sx_is_sym(d, arrow)) {
      r.skip();
      // (recover) the answer of a form that could not be read fails with it, as one check
      bool of_failed = recover && !out.empty() && out.back().error && !out.back().expected;
      if (r.eof()) {
        if (of_failed) break;
        Error e("===> at end of input with no answer", d->pos);
        if (!recover || out.empty() || out.back().expected || out.back().error) throw e;
        note(out.back(), e);
        break;
      }
      if (of_failed) {
        out.back().expected = sx_nil(d->pos);
        if (!r.skip_datum_text()) break;
        rest_of_line();
        continue;
      }
      bool orphan = out.empty() || out.back().expected || out.back().error;
      if (orphan && !recover) r.fail("===> must follow an expression", d->pos);
      if (orphan) {  // (recover: the answer is a failed form of its own)
        out.push_back(TopForm{sx_nil(d->pos), nullptr, Pos(), nullptr, Pos()});
        if (!recovered(out.back(), Error("===> must follow an expression", d->pos), r.i, r.line, r.col)) break;
        continue;
      }
      start = r.i, line = r.line, col = r.col;
      try {
        out.back().expected = r.read_datum();
        out.back().arrow = d->pos;
      } catch (const Error& e) {
        if (!recovered(out.back(), e, start, line, col)) break;
        rest_of_line();
      }
      continue;
    }
    out.push_back(TopForm{d, nullptr, Pos(), nullptr, Pos()});
  }
  return out;
}

// A scan, not a read: it runs on the REPL's own (small) stack, where a recursive reader could
// overflow on hostile nesting. Incomplete means an open list, string or block comment, or a datum
// still owed at the top level: after a quote (' ` , ,@), a datum comment #; or an answer's ===>.
bool input_complete(const std::string& text) {
  long depth = 0, owed = 0;
  auto datum_done = [&] {
    if (depth == 0 && owed > 0) owed--;
  };
  size_t i = 0, n = text.size();
  while (i < n) {
    char c = text[i];
    if (c == ';') {
      while (i < n && text[i] != '\n') i++;
    } else if (c == '"') {
      for (i++; i < n && text[i] != '"'; i++)
        if (text[i] == '\\') i++;
      if (i >= n) return false;
      i++;
      datum_done();
    } else if (c == '#' && i + 1 < n && text[i + 1] == '|') {
      long nest = 1;
      for (i += 2; i < n && nest > 0;) {
        if (text[i] == '|' && i + 1 < n && text[i + 1] == '#') { nest--; i += 2; }
        else if (text[i] == '#' && i + 1 < n && text[i + 1] == '|') { nest++; i += 2; }
        else i++;
      }
      if (nest > 0) return false;
    } else if (c == '#' && i + 1 < n && text[i + 1] == ';') {
      i += 2;  // a datum comment: the datum after it is scanned as any other (not a line comment)
      if (depth == 0) owed++;
    } else if (c == '(' || c == '[') {
      depth++;
      i++;
    } else if (c == ')' || c == ']') {
      depth--;
      i++;
      datum_done();
    } else if (c == '\'' || c == '`' || c == ',') {
      i += c == ',' && i + 1 < n && text[i + 1] == '@' ? 2 : 1;
      if (depth == 0 && owed == 0) owed = 1;  // (the quoted datum; under a #; it is the one owed)
    } else if (isspace((unsigned char)c)) {
      i++;
    } else {  // an atom
      size_t j = i;
      while (j < n && !isspace((unsigned char)text[j]) && !strchr("()[]\";'`,", text[j])) j++;
      if (depth == 0 && text.compare(i, j - i, "===>") == 0) owed++;
      else datum_done();
      i = j;
    }
  }
  return depth < 0 || (depth == 0 && owed == 0);
}

std::string sx_to_string(const Sx* s) {
  switch (s->type) {
    case Sx::Real: {
      Value v = Value::real(s->real);
      extern std::string write_string(Value);
      return write_string(v);
    }
    case Sx::Bool: return s->boolean ? "#t" : "#f";
    case Sx::Str: return std::string("\"") + std::string(s->text, s->len) + "\"";
    case Sx::Sym: return s->text;
    case Sx::Nil: return "()";
    case Sx::Pair: {
      std::string out = "(";
      const Sx* p = s;
      bool first = true;
      while (p->type == Sx::Pair) {
        if (!first) out += " ";
        first = false;
        out += sx_to_string(p->car);
        p = p->cdr;
      }
      if (p->type != Sx::Nil) out += " . " + sx_to_string(p);
      return out + ")";
    }
  }
  return "?";
}

Value sx_to_value(const Sx* s) {
  switch (s->type) {
    case Sx::Real: return Value::real(s->real);
    case Sx::Bool: return Value::boolean(s->boolean);
    case Sx::Str: return make_string(std::string(s->text, s->len));
    case Sx::Nil: return Value::nil();
    case Sx::Sym: throw Error(std::string("quote: VLAD has no symbols, got ") + s->text, s->pos);
    case Sx::Pair: {
      Value a = sx_to_value(s->car);  // (the car first: an error names the first symbol)
      return cons(a, sx_to_value(s->cdr));
    }
  }
  return Value::nil();
}

}  // namespace vlad
