#!/bin/sh
# Builds the libFuzzer targets with clang: every core source is compiled
# again with clang's fuzzer instrumentation, ASan and UBSan (the gcc-built
# libtfenc has no coverage feedback for libFuzzer), into a static archive
# that each target links.
#
#   tests/fuzz/build.sh OUT_DIR [CONFIGURED_BUILD_DIR]
#
# CONFIGURED_BUILD_DIR is a build tree where configure ran (for config.h);
# by default the top-level build/ that tests/run-all.sh makes.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: tests/fuzz/build.sh OUT_DIR [CONFIGURED_BUILD_DIR]}
configured=${2:-$top/build}
[ -f "$configured/config.h" ] || {
  echo "fuzz/build.sh: $configured/config.h not found: run configure there first" >&2
  exit 1
}
command -v clang >/dev/null || {
  echo "fuzz/build.sh: clang not found (Debian packages clang and libclang-rt-14-dev)" >&2
  exit 1
}
mkdir -p "$out/objects"
out=$(cd "$out" && pwd)

# The flags and libraries configure found (pkg-config, optional oneDNN...),
# read from the configured Makefile, and the project's warnings and defines
# (as in Makefile.am's AM_CPPFLAGS).
makefile_values() { # makefile_values REGEX: values of the matching variables that
  # configure set (automake's own, such as AM_CFLAGS, refer to others: skipped)
  sed -n "/\\\$(/!s/^\($1\) = //p" "$configured/Makefile" | tr '\n' ' '
}
# -fno-sanitize-recover: UBSan findings stop the fuzzer like ASan's do.
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cflags="-std=c11 -g -O1 $(makefile_values WARN_CFLAGS) -D_GNU_SOURCE -DHAVE_CONFIG_H
  -I$top/core/include -I$top/core
  -I$configured -I$configured/core $(makefile_values '[A-Z0-9]*_CFLAGS') $sanitize"
libs="$(makefile_values '[A-Z0-9]*_LIBS') -lm"
# Arrow from a pyarrow wheel is linked from the build tree's arrow-lib/
# (configure.ac), which installed programs find relative to themselves;
# the fuzzers are never installed: they find it there.
if [ -d "$configured/arrow-lib" ] && [ -n "$(makefile_values PARQUET_BUNDLED_LIBRARIES | tr -d ' ')" ]; then
  libs="$libs -Wl,-rpath,$configured/arrow-lib"
fi

# Through ccache when tests/run-all.sh found it (CCACHE_BASEDIR set).
launcher=""
[ -z "${CCACHE_BASEDIR:-}" ] || launcher=ccache

objects=""
stale=""
for source in "$top"/core/*/*.c; do
  object="$out/objects/$(basename "$source" .c).o"
  # Rebuild only what changed, so that run.sh after an edit is quick.
  if [ ! -f "$object" ] || [ "$source" -nt "$object" ] \
     || [ -n "$(find "$top/core" -name '*.h' -newer "$object" | head -n 1)" ]; then
    stale="$stale $source"
  fi
  objects="$objects $object"
done
# TFENC_FUZZ_JOBS compilers at a time (2: CI's machine has two cores).
# $0 is the flags, split into words as the single-compiler loop did.
if [ -n "$stale" ]; then
  printf '%s\n' $stale | xargs -P "${TFENC_FUZZ_JOBS:-2}" -I '{}' sh -c \
    '$3 clang $0 -fsanitize=fuzzer-no-link -c "$1" -o "$2/objects/$(basename "$1" .c).o"' \
    "$cflags" '{}' "$out" "$launcher"
fi
# The C++ sources (the Parquet reader, built only when configure found
# Arrow; corpus.c calls it then): clang++ with the same flags in C++17,
# less UBSan's vptr check, whose C++ runtime the C link does not carry.
if [ -n "$(makefile_values PARQUET_LIBS | tr -d ' ')" ]; then
  cxxflags=$(printf '%s' "$cflags" | sed 's/-std=c11/-std=c++17/')
  for source in "$top"/core/*/*.cc; do
    [ -f "$source" ] || continue
    object="$out/objects/$(basename "$source" .cc).o"
    if [ ! -f "$object" ] || [ "$source" -nt "$object" ]; then
      # shellcheck disable=SC2086
      $launcher clang++ $cxxflags -fno-sanitize=vptr -Wno-unused-command-line-argument -fsanitize=fuzzer-no-link \
        -c "$source" -o "$object" 2>&1 | grep -v "is valid for C/ObjC but not for C++" >&2
      stale="$stale $source"
    fi
    objects="$objects $object"
  done
  libs="$libs -lstdc++"
fi
# The archive and the targets are made again only when something they are
# made of changed, so that run.sh right after a build (tests/run-all.sh
# builds the targets while the normal suite runs) starts fuzzing at once.
if [ -n "$stale" ] || [ ! -f "$out/libtfenc-fuzz.a" ]; then
  rm -f "$out/libtfenc-fuzz.a"
  ar rcs "$out/libtfenc-fuzz.a" $objects
fi
for target in "$top"/tests/fuzz/fuzz_*.c; do
  name=$(basename "$target" .c)
  if [ ! -f "$out/$name" ] || [ "$out/libtfenc-fuzz.a" -nt "$out/$name" ] \
     || [ "$target" -nt "$out/$name" ]; then
    clang $cflags -fsanitize=fuzzer "$target" "$out/libtfenc-fuzz.a" $libs -o "$out/$name"
  fi
done
echo "fuzz/build.sh: built the targets in $out"
