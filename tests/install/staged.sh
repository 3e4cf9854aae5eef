#!/bin/sh
# Installs the build tree into a staging directory (make install DESTDIR=...)
# and uses it as a user of the installed tfenc would: every promised file is
# there, the installed binaries run on the installed libtfenc and plugins,
# tfenc/plugin.h compiles alone with `pkg-config --cflags tfenc`, and the
# out-of-tree example plugins (plugins/examples/attention-pooling and
# scale-norm) build with their own Makefiles against the staged SDK, run in
# the staged tfenc-batch, and match their PyTorch references (tolerances:
# see their compare.py).
set -u
: "${abs_top_builddir:?run from make check}" "${abs_top_srcdir:?run from make check}"
: "${REFERENCE_PYTHON:=/usr/bin/python3}" "${MPIEXEC:=mpiexec}"
: "${TFENC_CC:=cc}" "${TFENC_SANITIZER_FLAGS:=}"
for variable in TFENC_BINDIR TFENC_LIBDIR TFENC_INCLUDEDIR TFENC_PKGLIBDIR TFENC_MANDIR; do
  eval "[ -n \"\${$variable:-}\" ]" || { echo "staged: FAIL: $variable is not set (tests/install.mk sets it)"; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-staged.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
tmp=$(cd "$tmp" && pwd -P) # the loader reports real paths
failed=0
ok() { echo "staged: ok   $*"; }
fail() { echo "staged: FAIL $*"; failed=$((failed + 1)); }
# The example's make runs below a make check: the parent's job server is
# not its.
unset MAKEFLAGS MFLAGS MAKELEVEL

# The build tree's staged install (tests/install.mk stages it before any
# test starts, so that no test relinks the plugins under the others).
if [ -n "${TFENC_STAGE:-}" ] && [ -f "$TFENC_STAGE$TFENC_BINDIR/tfenc-batch" ]; then
  stage=$(cd "$TFENC_STAGE" && pwd -P) # the loader reports real paths
  ok "make install DESTDIR=$stage (staged before the tests)"
else
  echo "staged: FAIL no staged install in '${TFENC_STAGE:-}' (tests/install.mk makes it)"
  exit 1
fi

bindir=$stage$TFENC_BINDIR
libdir=$stage$TFENC_LIBDIR
pkglibdir=$stage$TFENC_PKGLIBDIR
for file in "$bindir/tfenc-batch" "$bindir/tfenc-import" "$bindir/tfenc-export" "$libdir/libtfenc.so" \
    "$stage$TFENC_INCLUDEDIR/tfenc/plugin.h" "$stage$TFENC_INCLUDEDIR/tfenc/plugin_math.h" \
    "$stage$TFENC_INCLUDEDIR/tfenc/plugin_parallel.h" "$libdir/pkgconfig/tfenc.pc" \
    "$pkglibdir/layers.so" "$pkglibdir/attention.so" \
    "$stage$TFENC_MANDIR/man1/tfenc-batch.1" "$stage$TFENC_MANDIR/man1/tfenc-import.1" \
    "$stage$TFENC_MANDIR/man1/tfenc-export.1" "$stage$TFENC_MANDIR/man7/tfenc-plugin.7"; do
  if [ -f "$file" ]; then ok "installed ${file#"$stage"}"; else fail "not installed: ${file#"$stage"}"; fi
done

# The pages must render without a single groff warning.
for page in "$stage$TFENC_MANDIR/man1/tfenc-batch.1" "$stage$TFENC_MANDIR/man1/tfenc-import.1" \
    "$stage$TFENC_MANDIR/man1/tfenc-export.1" "$stage$TFENC_MANDIR/man7/tfenc-plugin.7"; do
  warnings=$(LC_ALL=C.UTF-8 groff -mandoc -ww -z -Tutf8 "$page" 2>&1)
  if [ -z "$warnings" ]; then ok "groff renders ${page##*/} cleanly"; else fail "${page##*/}: $warnings"; fi
done

# The installed programs run on the staged libtfenc, not on the build tree's
# or on one installed earlier into the real prefix.
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
for program in tfenc-batch tfenc-import tfenc-export; do
  resolved=$(ldd "$bindir/$program" | sed -n 's/.*libtfenc\.so[^ ]* => \([^ ]*\).*/\1/p')
  case $resolved in
    "$libdir"/*) ok "$program loads $resolved" ;;
    *) fail "$program loads libtfenc from '$resolved', not from $libdir" ;;
  esac
done
if "$bindir/tfenc-batch" --version >"$tmp/version.txt" 2>&1 && "$bindir/tfenc-import" --help >/dev/null 2>&1 \
    && "$bindir/tfenc-export" --version >>"$tmp/version.txt" 2>&1; then
  ok "installed tfenc-batch --version, tfenc-export --version: $(paste -s -d ';' "$tmp/version.txt")"
else
  fail "the installed programs do not run: $(cat "$tmp/version.txt")"
fi

# The manual pages document every option --help lists, and list no option
# the program does not know.
for program in tfenc-batch tfenc-import tfenc-export; do
  page=$stage$TFENC_MANDIR/man1/$program.1
  "$bindir/$program" --help 2>&1 | grep -o -- '--[a-z][a-z-]*' | sort -u >"$tmp/help-options"
  grep -o 'Fl -[a-z][a-z-]*' "$page" | sed 's/^Fl -/--/' | sort -u >"$tmp/man-options"
  missing=$(comm -23 "$tmp/help-options" "$tmp/man-options" | tr '\n' ' ')
  [ -z "$missing" ] && ok "$program.1 documents every option of --help" \
    || fail "$program.1 does not document: $missing"
  for option in $(cat "$tmp/man-options"); do
    # (a dummy argument, for the options that take one)
    if "$bindir/$program" "$option" a.b=c 2>&1 | grep -q 'unknown option'; then
      fail "$program.1 documents $option, which $program does not accept"
    fi
  done
done

# The installed plugins load and provide the built-in layer types.
TFENC_PLUGIN_PATH=$pkglibdir
export TFENC_PLUGIN_PATH
"$bindir/tfenc-batch" --list-plugins >"$tmp/plugins.txt" 2>&1
for type in embedding sinusoidal mha ffn layernorm rmsnorm pooling; do
  if grep -Eq "^  $type +.*\[$pkglibdir/[a-z_]+\.so\]\$" "$tmp/plugins.txt"; then
    ok "layer type $type comes from the installed plugins"
  else
    fail "layer type $type is not listed from $pkglibdir:"; cat "$tmp/plugins.txt"
  fi
done

# The install stands alone: every RUNPATH of an installed program or
# library is relative to the file itself ($ORIGIN) or the install's own
# library folders, never a home directory, a venv or the build tree.
runpaths_ok=1
for file in $(find "$stage" -type f); do
  readelf -h "$file" >/dev/null 2>&1 || continue
  runpath=$(readelf -d "$file" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p')
  old_ifs=$IFS
  IFS=:
  for entry in $runpath; do
    case $entry in
      '$ORIGIN'|'$ORIGIN/'*|"$TFENC_LIBDIR"|"$TFENC_PKGLIBDIR") ;;
      *) fail "${file#"$stage"} has RUNPATH entry '$entry', outside the install"; runpaths_ok=0 ;;
    esac
  done
  IFS=$old_ifs
done
[ "$runpaths_ok" = 1 ] && ok "every installed ELF file's RUNPATH is \$ORIGIN-relative or the install's own"

# Arrow from a pyarrow wheel travels with the install (configure.ac): its
# libraries are installed beside the plugins, libtfenc loads them from
# there, and a Parquet job runs with the wheel's venv hidden (a mount
# namespace lays an empty folder over it for that job alone).
if [ -n "${TFENC_PARQUET_BUNDLED:-}" ]; then
  for library in $TFENC_PARQUET_BUNDLED; do
    resolved=$(ldd "$libdir/libtfenc.so" | sed -n "s/^[[:space:]]*$library => \([^ ]*\).*/\1/p")
    case $resolved in
      "$pkglibdir/arrow/$library") ok "libtfenc loads $library from ${resolved#"$stage"}" ;;
      *) fail "libtfenc loads $library from '$resolved', not from the install's $TFENC_PKGLIBDIR/arrow" ;;
    esac
    # tfenc-export calls Arrow itself: its own RUNPATH leads there too.
    resolved=$(ldd "$bindir/tfenc-export" | sed -n "s/^[[:space:]]*$library => \([^ ]*\).*/\1/p")
    resolved=$(realpath -m -s "$resolved") # (its RUNPATH climbs out of bin/: bin/../lib)
    case $resolved in
      "$pkglibdir/arrow/$library") ok "tfenc-export loads $library from ${resolved#"$stage"}" ;;
      *) fail "tfenc-export loads $library from '$resolved', not from the install's $TFENC_PKGLIBDIR/arrow" ;;
    esac
  done
  . "$abs_top_srcdir/tests/pipeline/common.sh"
  venv=$(cd "$(dirname "$TFENC_VENV_PYTHON")/.." && pwd -P)
  if ! prepare_example bert-text "$tmp/parquet"; then
    fail "cannot make the bert-text model for the Parquet job"
  elif ! "$TFENC_VENV_PYTHON" -c "
import sys, pyarrow, pyarrow.parquet
lines = [l.rstrip('\n') for l in open(sys.argv[1], encoding='utf-8')]
pyarrow.parquet.write_table(pyarrow.table({'text': lines}), sys.argv[2], row_group_size=7)
" "$tmp/parquet/corpus.txt" "$tmp/parquet/corpus.parquet"; then
    fail "cannot write the Parquet corpus with $TFENC_VENV_PYTHON"
  else
    # The job in a mount namespace where the venv is an empty tmpfs; where
    # none can be made (a chroot), the loader's own account of what it
    # loaded (LD_DEBUG=libs), which must name nothing in the venv.
    hide_venv() {
      in_private_mounts sh -c 'mount -t tmpfs -o size=1m tfenc-no-venv "$0" && exec "$@"' \
        "$venv" "$@"
    }
    if hide_venv sh -c '! test -e "$1"' sh "$venv/bin/python" 2>"$tmp/unshare.err"; then
      how="with $venv hidden"
      run_parquet() { hide_venv "$@"; }
    else
      how="as the loader reports it (no mount namespace here: $(head -n 1 "$tmp/unshare.err"))"
      run_parquet() { LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/loader" "$@"; }
    fi
    if (cd "$tmp/parquet" && run_parquet "$bindir/tfenc-batch" --quiet --set job.input=corpus.parquet \
            --set job.output=parquet.h5 job.ini) >"$tmp/parquet.log" 2>&1; then
      (cd "$tmp/parquet" && "$bindir/tfenc-batch" --quiet --set job.output=text.h5 job.ini) \
        >>"$tmp/parquet.log" 2>&1
      from_venv=$(cat "$tmp"/loader.* 2>/dev/null | grep 'calling init:' | grep -F "$venv" | head -n 1)
      if [ -n "$from_venv" ]; then
        fail "installed tfenc-batch loads from the venv: $from_venv"
      elif [ -z "${how##as the loader*}" ] \
          && ! cat "$tmp"/loader.* 2>/dev/null | grep 'calling init:' \
               | grep -qF "$pkglibdir/arrow/libparquet"; then
        fail "the loader's account (LD_DEBUG=libs) does not show libparquet from the install"
      elif result=$("$REFERENCE_PYTHON" "$abs_top_srcdir/tests/pipeline/compare_layouts.py" \
                    "$tmp/parquet/text.h5" "$tmp/parquet/parquet.h5"); then
        ok "installed tfenc-batch reads Parquet $how, the same rows as from text: $result"
      else
        fail "the Parquet job $how differs from the text job: $result"
      fi
      # ... and tfenc-export writes it back as Parquet, every row.
      if (cd "$tmp/parquet" && run_parquet "$bindir/tfenc-export" parquet.h5 --parquet exported) \
            >"$tmp/export.log" 2>&1 \
          && "$TFENC_VENV_PYTHON" -c "
import sys, h5py, pyarrow.dataset
rows = len(h5py.File(sys.argv[1], 'r')['lengths'])
sys.exit(pyarrow.dataset.dataset(sys.argv[2]).count_rows() != rows)
" "$tmp/parquet/parquet.h5" "$tmp/parquet/exported"; then
        ok "installed tfenc-export writes every row as Parquet $how"
      else
        fail "installed tfenc-export $how: $(head -n 3 "$tmp/export.log")"
      fi
    else
      fail "installed tfenc-batch cannot read Parquet $how: $(head -n 3 "$tmp/parquet.log")"
    fi
  fi
elif grep -q '^#define HAVE_PARQUET 1' "$abs_top_builddir/config.h"; then
  ok "Arrow comes from the system (pkg-config), not a wheel: nothing to carry"
fi

# pkg-config, pointed at the staging directory: the .pc names the final
# prefix, and PKG_CONFIG_SYSROOT_DIR prefixes its -I and -L with the stage.
PKG_CONFIG_PATH=$libdir/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$stage
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
pkg-config --cflags tfenc >"$tmp/cflags" && pkg-config --libs tfenc >"$tmp/libs" \
  || { fail "pkg-config cannot read the staged tfenc.pc"; exit 1; }
cflags=$(sed 's/ *$//' "$tmp/cflags")
libs=$(sed 's/ *$//' "$tmp/libs")
[ "$cflags" = "-I$stage$TFENC_INCLUDEDIR" ] && ok "pkg-config --cflags tfenc: $cflags" \
  || fail "pkg-config --cflags tfenc gives '$cflags', expected -I$stage$TFENC_INCLUDEDIR"
[ "$libs" = "-L$libdir -ltfenc" ] && ok "pkg-config --libs tfenc: $libs" \
  || fail "pkg-config --libs tfenc gives '$libs', expected -L$libdir -ltfenc"

# The SDK header is self-contained, strict C11 and C++ clean, with no flags
# but pkg-config's; and a program calling an SDK function links with --libs.
cat >"$tmp/header_alone.c" <<'EOF'
#include <tfenc/plugin.h>
#include <stdio.h>
int main(void)
{
    puts(tfenc_status_string(TFENC_ERR_WEIGHTS));
    return TFENC_ABI_MAJOR >= 1 ? 0 : 1;
}
EOF
# shellcheck disable=SC2086 # the flags are word lists
if $TFENC_CC -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags -fsyntax-only "$tmp/header_alone.c" \
    && c++ -x c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror $cflags -fsyntax-only "$tmp/header_alone.c"; then
  ok "tfenc/plugin.h compiles alone as C11 and C++11"
else
  fail "tfenc/plugin.h does not compile alone with only $cflags"
fi
# The SDK's header-only services (plugin_math.h, plugin_parallel.h) compile
# alone as C11 and C++11 with pkg-config's flags, and a loop of them gives
# libm's numbers, with OpenMP's threads and without OpenMP.
cat >"$tmp/services.c" <<'EOF'
#include <tfenc/plugin_math.h>
#include <tfenc/plugin_parallel.h>
#include <math.h>
#include <stdio.h>
#define N 20000
static float in[N], out[N];
TFENC_VECTOR_CLONES
static void exponentiate(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = tfenc_fast_exp(x[i]);
}
int main(void)
{
    for (int i = 0; i < N; i++)
        in[i] = -20.0f + 40.0f * (float)i / N;
    TFENC_PARALLEL_FOR(chunk, N / 1000, N,
                       exponentiate(in + chunk * 1000, out + chunk * 1000, 1000));
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double relative = fabs(out[i] - exp((double)in[i])) / exp((double)in[i]);
        worst = relative > worst ? relative : worst;
    }
    double gelu = fabs(tfenc_gelu(1.0f) - 0.8413447460685429);
    printf("%.3g %.3g %d %d\n", worst, gelu, TFENC_PLUGIN_MATH_VERSION,
           TFENC_PLUGIN_PARALLEL_VERSION);
    return worst < 1e-6 && gelu < 1e-6 ? 0 : 1;
}
EOF
services_ok=1
for header in plugin_math.h plugin_parallel.h; do
  printf '#include <tfenc/%s>\nint main(void) { return 0; }\n' "$header" >"$tmp/alone.c"
  # shellcheck disable=SC2086
  $TFENC_CC -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags -fsyntax-only "$tmp/alone.c" \
    && c++ -x c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror $cflags -fsyntax-only "$tmp/alone.c" \
    || { fail "tfenc/$header does not compile alone with only $cflags"; services_ok=0; }
done
result=
for openmp in -fopenmp ""; do
  # shellcheck disable=SC2086
  if $TFENC_CC -std=c11 -O2 -Wall -Werror $openmp $cflags -o "$tmp/services" "$tmp/services.c" -lm \
      && result=$(OMP_NUM_THREADS=2 "$tmp/services"); then
    :
  else
    fail "a loop of tfenc_fast_exp in TFENC_PARALLEL_FOR (${openmp:-no OpenMP}) fails: ${result:-no program}"
    services_ok=0
  fi
done
[ "$services_ok" = 1 ] && ok "tfenc/plugin_math.h and plugin_parallel.h compile alone; a loop of them matches libm (relative error, GELU error, versions: $result)"
# The sanitizer build's libtfenc needs its runtime first in the program.
# shellcheck disable=SC2086
if $TFENC_CC -std=c11 $TFENC_SANITIZER_FLAGS $cflags -o "$tmp/header_alone" "$tmp/header_alone.c" $libs \
    && message=$("$tmp/header_alone") && [ -n "$message" ]; then
  ok "a program links with pkg-config --libs tfenc and runs (tfenc_status_string: $message)"
else
  fail "linking against the staged libtfenc with '$libs' failed"
fi

# The example plugin, built out of tree by its own Makefile.
example=$tmp/attention-pooling
cp -R "$abs_top_srcdir/plugins/examples/attention-pooling" "$example" && chmod -R u+w "$example"
if make -C "$example" CC="$TFENC_CC" >"$tmp/example.log" 2>&1 && [ -f "$example/attention_pooling.so" ]; then
  ok "the example plugin builds with its Makefile against the staged SDK"
else
  cat "$tmp/example.log"
  fail "the example plugin does not build"; exit 1
fi
if grep -q 'warning' "$tmp/example.log"; then
  cat "$tmp/example.log"; fail "the example plugin builds with warnings"
fi
(cd "$example" && ./make-model) || { fail "the example's make-model"; exit 1; }

cd "$example" || exit 1
"$bindir/tfenc-batch" --list-plugins job.ini >"$tmp/plugins.txt" 2>&1
grep -Eq "^  attention_pooling +.*\[$example/attention_pooling\.so\]\$" "$tmp/plugins.txt" \
  && ok "job.ini's plugin_path finds attention_pooling.so" \
  || { fail "attention_pooling is not found through job.ini's plugin_path:"; cat "$tmp/plugins.txt"; }
if "$bindir/tfenc-batch" --dry-run job.ini >"$tmp/dry-run.txt" 2>&1 \
    && grep -q 'attention_pool .*attention_pooling' "$tmp/dry-run.txt"; then
  ok "tfenc-batch --dry-run job.ini shows the plugin's step"
else
  cat "$tmp/dry-run.txt"; fail "tfenc-batch --dry-run job.ini"
fi
if "$bindir/tfenc-batch" --quiet job.ini; then
  ok "installed tfenc-batch runs job.ini"
  "$REFERENCE_PYTHON" compare.py embeddings.h5 expected.h5 \
    && ok "the example's output matches PyTorch" || fail "the example's output differs from PyTorch"
else
  fail "installed tfenc-batch job.ini"
fi
# The same with the parameter changed and two ranks.
if "$MPIEXEC" -n 2 "$bindir/tfenc-batch" --quiet --set attention_pool.normalize=true \
    --set job.output=normalized.h5 job.ini; then
  ok "$MPIEXEC -n 2 tfenc-batch --set attention_pool.normalize=true job.ini"
  "$REFERENCE_PYTHON" compare.py --normalized normalized.h5 expected.h5 \
    && ok "the normalised output of two ranks matches PyTorch" || fail "normalised output differs"
else
  fail "$MPIEXEC -n 2 tfenc-batch with normalize = true"
fi

# The second example, scale-norm: a per-token plugin with a parameter and a
# weight, built and checked the same way (tolerances: its compare.py).
example=$tmp/scale-norm
cp -R "$abs_top_srcdir/plugins/examples/scale-norm" "$example" && chmod -R u+w "$example"
if make -C "$example" CC="$TFENC_CC" >"$tmp/scale-norm.log" 2>&1 && [ -f "$example/scale_norm.so" ] \
    && ! grep -q 'warning' "$tmp/scale-norm.log"; then
  ok "the scale-norm example builds without warnings against the staged SDK"
else
  cat "$tmp/scale-norm.log"; fail "the scale-norm example does not build cleanly"; exit 1
fi
(cd "$example" && ./make-model) || { fail "the scale-norm example's make-model"; exit 1; }
cd "$example" || exit 1
# Its type, found through plugin_path = . (the job file's directory, asked
# for from elsewhere), with its one key, its default, range and help.
(cd / && "$bindir/tfenc-batch" --list-plugins "$example/job.ini") >"$tmp/plugins.txt" 2>&1
if grep -Eq "^  scale_norm +.*\[$example/scale_norm\.so\]\$" "$tmp/plugins.txt" \
    && grep -Eq "^      eps +float +1e-5 +>0 +lower bound" "$tmp/plugins.txt"; then
  ok "--list-plugins job.ini lists scale_norm and its key eps (from another directory)"
else
  fail "scale_norm or its key eps is not listed through job.ini's plugin_path:"; cat "$tmp/plugins.txt"
fi
if (cd / && "$bindir/tfenc-batch" --quiet "$example/job.ini"); then
  ok "installed tfenc-batch runs scale-norm/job.ini (from another directory)"
  "$REFERENCE_PYTHON" compare.py embeddings.h5 expected.h5 \
    && ok "the scale-norm output matches PyTorch" || fail "the scale-norm output differs from PyTorch"
else
  fail "installed tfenc-batch scale-norm/job.ini"
fi
if "$MPIEXEC" -n 2 "$bindir/tfenc-batch" --quiet --set final_norm.eps=1000 \
    --set job.output=large-eps.h5 job.ini; then
  ok "$MPIEXEC -n 2 tfenc-batch --set final_norm.eps=1000 scale-norm/job.ini"
  "$REFERENCE_PYTHON" compare.py --large-eps large-eps.h5 expected.h5 \
    && ok "the large-eps output of two ranks matches PyTorch" || fail "large-eps output differs"
else
  fail "$MPIEXEC -n 2 tfenc-batch with final_norm.eps = 1000"
fi

if [ "$failed" -eq 0 ]; then
  echo "staged: every check passed"
else
  echo "staged: $failed checks failed"
  exit 1
fi
