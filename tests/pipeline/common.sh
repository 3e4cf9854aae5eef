# Sourced by the pipeline and resume tests: the test environment, the
# rank layouts and a way to copy an example.
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"

# The rank layouts, as RANKS:STAGES (data_parallel = RANKS / STAGES).
layouts="1:1 2:1 2:2 4:2 8:2 8:4"

# prepare_example NAME DIR: copies jobs/NAME to DIR with its model made.
# The model is made once per generator input: a cache keyed by the
# example's files, the generators' sources and the Pythons that may run
# them with their packages, shared by the tests that run in parallel and by
# the build trees (the sanitizer build's suite reuses the normal build's
# models), in tests/harness/generate's cache (TFENC_TEST_CACHE; set empty,
# the build tree's tests/data/generated/examples/). Made in a scratch
# directory and renamed into place; when two tests make it at once, the
# first rename wins and the other's copy is dropped. The tests that check
# make-model itself (tests/reference/run_jobs.sh, tests/install/staged.sh)
# never use it.
prepare_example() {
  cache_root=${TFENC_TEST_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/generated}
  cache_root=${cache_root:-$builddir/tests/data/generated}/examples
  key=$( { find "$srcdir/jobs/$1" "$srcdir/tests/reference" -type f ! -name '*.pyc' | LC_ALL=C sort \
             | xargs cat; echo "$python ${TFENC_VENV_PYTHON:-}"
           ls /usr/lib/python3/dist-packages
           [ -z "${TFENC_VENV_PYTHON:-}" ] || ls "$(dirname "$TFENC_VENV_PYTHON")"/../lib/python3*/site-packages
         } | sha256sum | cut -c1-16) \
    || return 1
  cache="$cache_root/$1-$key"
  if [ ! -d "$cache" ]; then
    mkdir -p "$cache_root" || return 1
    scratch=$(mktemp -d "$cache_root/.$1.XXXXXX") || return 1
    if ! { cp -R "$srcdir/jobs/$1/." "$scratch" && chmod -R u+w "$scratch" \
             && (cd "$scratch" && ./make-model >/dev/null); }; then
      rm -rf "$scratch"
      return 1
    fi
    mv -T "$scratch" "$cache" 2>/dev/null || rm -rf "$scratch"
  fi
  rm -rf "$2" && mkdir -p "$(dirname "$2")" && cp -R "$cache" "$2"
}
