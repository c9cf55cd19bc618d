// compare_output.cpp — compares two program outputs token by token; reals must agree within
// 1e-9 (absolute or relative). Exit 0 when they match. Used by tests/run.sh for golden files.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

static std::vector<std::string> tokens(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (isspace((unsigned char)c)) { i++; continue; }
    if (c == '(' || c == ')') { out.push_back(std::string(1, c)); i++; continue; }
    size_t j = i;
    while (j < s.size() && !isspace((unsigned char)s[j]) && s[j] != '(' && s[j] != ')') j++;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

static bool number(const std::string& t, double& d) {
  if (t == "+nan") { d = NAN; return true; }
  if (t == "+inf") { d = INFINITY; return true; }
  if (t == "-inf") { d = -INFINITY; return true; }
  char* end;
  d = strtod(t.c_str(), &end);
  return !t.empty() && *end == 0;
}

int main(int argc, char** argv) {
  if (argc != 3) { std::cerr << "usage: compare-output EXPECTED ACTUAL\n"; return 2; }
  auto a = tokens(argv[1]), b = tokens(argv[2]);
  if (a.size() != b.size()) return 1;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i] == b[i]) continue;
    double x, y;
    if (!number(a[i], x) || !number(b[i], y)) return 1;
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(x) || std::isinf(y)) { if (x == y) continue; return 1; }  // (inf - 5 is within inf * 1e-9)
    double d = std::fabs(x - y);
    if (!(d <= 1e-9 || d <= 1e-9 * std::max(std::fabs(x), std::fabs(y)))) return 1;
  }
  return 0;
}
