# vlad — build, test, demo, bench, install. `make demo` and `make test` install dependencies first.
CXX      ?= g++
CXXFLAGS ?= -O2 -g
override CXXFLAGS += -std=c++17 -Wall -Wextra -DGC_THREADS -pthread -DVLAD_HAVE_ASMJIT
LDLIBS   = -lgc -ledit -lasmjit -pthread
PREFIX   ?= /usr/local
BUILD    ?= build

SRC = $(wildcard src/values/*.cpp src/eval/*.cpp src/ad/*.cpp src/prims/*.cpp src/api/*.cpp)
OBJ = $(SRC:%.cpp=$(BUILD)/%.o) $(BUILD)/src/prims/prelude_gen.o
HDR = $(wildcard src/*.hpp src/*/*.hpp)

.PHONY: all deps test unit vlad-tests demo bench instructions fuzz fuzz-diff install ubsan gc-stress clean

all: $(BUILD)/vlad $(BUILD)/libvlad.a

deps:
	@./scripts/deps.sh

$(BUILD)/src/prims/prelude_gen.cpp: src/prims/prelude.vlad
	@mkdir -p $(dir $@)
	@{ printf 'namespace vlad { extern const char* prelude_source; const char* prelude_source = R"VLAD_PRELUDE('; \
	   cat $<; printf ')VLAD_PRELUDE"; }\n'; } > $@

$(BUILD)/src/prims/prelude_gen.o: $(BUILD)/src/prims/prelude_gen.cpp
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cpp $(HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/libvlad.a: $(OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/vlad: $(BUILD)/repl/main.o $(BUILD)/libvlad.a
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

UNIT_SRC = $(wildcard tests/unit/*.cpp)
$(BUILD)/unit-tests: $(UNIT_SRC) $(BUILD)/libvlad.a $(HDR)
	$(CXX) $(CXXFLAGS) -Isrc $(UNIT_SRC) $(BUILD)/libvlad.a -o $@ $(LDLIBS)

$(BUILD)/compare-output: tests/compare_output.cpp
	$(CXX) $(CXXFLAGS) $< -o $@

test: deps
	@$(MAKE) --no-print-directory all $(BUILD)/unit-tests $(BUILD)/compare-output $(BUILD)/fuzz
	@./tests/run.sh $(BUILD)

demo: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/vlad scheme-examples/saddle.vlad

bench: all
	@./bench/run.sh $(BUILD)

# The instructions of each workload (callgrind: needs valgrind), e.g. against another build of the
# same tree: make instructions BASE=/tmp/base-build
instructions: all
	@./bench/instructions.sh $(BUILD) $(BASE)

fuzz: all $(BUILD)/fuzz
	$(BUILD)/fuzz 10000 tests/vlad/*.vlad $(wildcard ../shared/conformance/*.vlad)

fuzz-diff: all $(BUILD)/fuzz
	$(BUILD)/fuzz --diff 10000 tests/vlad/*.vlad $(wildcard ../shared/conformance/*.vlad)

$(BUILD)/fuzz: tests/fuzz/fuzz.cpp $(BUILD)/libvlad.a
	$(CXX) $(CXXFLAGS) -Isrc $< $(BUILD)/libvlad.a -o $@ $(LDLIBS)

ubsan:
	$(MAKE) BUILD=build-ubsan CXXFLAGS="-O1 -g -fsanitize=undefined -fno-sanitize-recover=undefined" \
	  LDLIBS="-lgc -ledit -lasmjit -pthread -fsanitize=undefined" all build-ubsan/unit-tests build-ubsan/compare-output build-ubsan/fuzz
	./tests/run.sh build-ubsan

# A build with GC stress (value.hpp: VLAD_GC_STRESS=N collects every N allocations), for hunting
# collectable objects held only where the collector does not look, e.g.
# VLAD_GC_STRESS=7 build-gc-stress/vlad --check FILE
gc-stress:
	$(MAKE) BUILD=build-gc-stress CXXFLAGS="-O2 -g -DVLAD_GC_STRESS" all build-gc-stress/unit-tests build-gc-stress/fuzz

install: all
	install -d $(PREFIX)/bin $(PREFIX)/include/vlad $(PREFIX)/lib/pkgconfig
	install -m 755 $(BUILD)/vlad $(PREFIX)/bin/vlad
	install -m 644 src/vlad.hpp $(PREFIX)/include/vlad/vlad.hpp
	install -m 644 $(BUILD)/libvlad.a $(PREFIX)/lib/libvlad.a
	sed -e 's|@PREFIX@|$(PREFIX)|g' vlad.pc.in > $(PREFIX)/lib/pkgconfig/vlad.pc

clean:
	rm -rf build build-ubsan build-gc-stress
