# Shared C build settings: one place for warnings and hardening flags.
CC       ?= cc
CFLAGS   ?= -O2 -g
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wformat=2 \
                   -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
override LDFLAGS += -pie -Wl,-z,relro,-z,now
