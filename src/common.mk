# Shared C build settings: one place for warnings and hardening flags.
CC       ?= cc
CFLAGS   ?= -O2 -g
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wformat=2 \
                   -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
override LDFLAGS += -pie -Wl,-z,relro,-z,now

# log, netaddr and units (../common) are shared by every program.
vpath %.c ../common
override CFLAGS += -I../common

# Every program builds `all` into $(OUT), the same again with AddressSanitizer
# and UBSan into build-asan/ (`make asan`), and runs its unit tests in both
# (`make test`). The including Makefile defines `all` and $(OUT)/unit-tests.
.DEFAULT_GOAL := all
OUT ?= build
SANITIZE := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

# Objects from the program's folder, its tests/ and ../common, into $(OUT).
FUZZ_SECONDS ?= 20
FUZZ_CC      ?= clang
HEADERS := $(wildcard *.h ../common/*.h)

$(OUT)/%.o: %.c $(HEADERS) | $(OUT)
	$(CC) $(CFLAGS) -c $< -o $@

$(OUT)/%.o: tests/%.c $(HEADERS) | $(OUT)
	$(CC) $(CFLAGS) -I. -c $< -o $@

$(OUT):
	mkdir -p $@

.PHONY: asan test clean
asan:
	$(MAKE) OUT=build-asan CFLAGS="$(SANITIZE)" LDFLAGS="-fsanitize=address,undefined"

test: all asan
	$(OUT)/unit-tests
	build-asan/unit-tests

clean:
	rm -rf build build-asan
