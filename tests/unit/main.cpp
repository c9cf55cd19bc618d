// main.cpp — the doctest runner for the unit tests (every tests/unit/*.cpp is linked in).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
