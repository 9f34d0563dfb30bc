# Thin wrapper around CMake; the README's two commands are `make run` and `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run test unit asan fuzz bench format style-check clean

all: build

deps:
	@scripts/install-deps.sh build

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The main job on the embedded default.
run: build
	@scripts/run-main.sh $(BUILD)

# Everything: unit, CLI and integration tests against real services, then the
# sanitizer build of the unit tests and a short fuzzing pass.
test:
	@scripts/install-deps.sh all
	@scripts/test.sh

unit: build
	@cd $(BUILD) && ctest --output-on-failure -L unit

asan: deps
	@scripts/test-asan.sh $(ASAN_BUILD)

fuzz: deps
	@scripts/fuzz.sh

# The one C style (.clang-format): apply it, or check it as make test does.
format:
	@scripts/install-deps.sh test
	@scripts/check-format.sh --fix

style-check:
	@scripts/install-deps.sh test
	@scripts/check-format.sh

bench: build
	@scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
