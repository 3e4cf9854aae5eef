# Sourced by the pipeline and resume tests: the test environment, the
# layouts of issue 4 and a way to copy an example.
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"

# The layouts of issue 4, as RANKS:STAGES (data_parallel = RANKS / STAGES).
layouts="1:1 2:1 2:2 4:2 8:2 8:4"

# prepare_example NAME DIR: copies jobs/NAME to DIR and makes its model.
prepare_example() {
  rm -rf "$2" && mkdir -p "$(dirname "$2")" && cp -R "$srcdir/jobs/$1" "$2" && chmod -R u+w "$2" \
    && (cd "$2" && ./make-model >/dev/null)
}
