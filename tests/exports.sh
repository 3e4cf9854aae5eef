#!/bin/sh
# The plugin ABI is tfenc/plugin.h and nothing else:
#  - libtfenc.so exports exactly the functions plugin.h declares under the
#    ABI versions (TFENC_1.0, TFENC_1.1, ...), and everything else it
#    exports is a tfenc_ name under TFENC_PRIVATE (core/libtfenc.map);
#  - no plugin of the tree (built-in, example, test) needs a TFENC_PRIVATE
#    symbol;
#  - the loader refuses a plugin that does, naming the version, and loads
#    the same plugin without that call.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${TFENC_CC:=cc}"
builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$top_srcdir" && pwd)
library=$builddir/core/.libs/libtfenc.so
header=$srcdir/core/include/tfenc/plugin.h
work=$builddir/tests/data/generated/exports
rm -rf "$work" && mkdir -p "$work" || exit 1
failed=0
ok() { echo "exports: ok   $*"; }
fail() { echo "exports: FAIL $*"; failed=$((failed + 1)); }

# Functions plugin.h declares: "TYPE tfenc_name(" at the start of a line.
grep -E '^(const )?[a-z_]+ \**tfenc_[a-z0-9_]+\(' "$header" \
  | sed -E 's/.*(tfenc_[a-z0-9_]+)\(.*/\1/' | sort -u > "$work/declared"
[ -s "$work/declared" ] || { fail "no function found in $header"; exit 1; }

# Defined dynamic symbols with their versions: "name@@VERSION" (nm -D prints
# the version of versioned symbols; the version names themselves are type A).
nm -D --defined-only "$library" | awk '$2 != "A" { print $3 }' > "$work/exported"
grep -E '@@?TFENC_1\.[0-9]+$' "$work/exported" | sed 's/@.*//' | sort -u > "$work/public"
if cmp -s "$work/declared" "$work/public"; then
  ok "libtfenc.so exports plugin.h's $(wc -l < "$work/declared") functions under TFENC_1.x"
else
  fail "plugin.h and the TFENC_1.x exports differ (< plugin.h only, > exported only; core/libtfenc.map):"
  diff "$work/declared" "$work/public" | sed 's/^/       /'
fi
others=$(grep -vE '@@?TFENC_1\.[0-9]+$' "$work/exported" | grep -vE '^tfenc_[a-z0-9_]+@@?TFENC_PRIVATE$')
if [ -z "$others" ]; then
  ok "every other export is a tfenc_ name of version TFENC_PRIVATE ($(grep -c '@@\?TFENC_PRIVATE' "$work/exported"))"
else
  fail "exports outside the plugin ABI and TFENC_PRIVATE: $(echo "$others" | head -n 10 | tr '\n' ' ')"
fi

# The tree's plugins use the plugin ABI only.
for plugin in "$builddir"/plugins/.libs/*.so "$builddir"/tests/plugins/.libs/*.so \
    "$builddir"/tests/plugins/hostile/.libs/*.so; do
  [ -f "$plugin" ] || continue
  private=$(nm -D --undefined-only "$plugin" | grep 'TFENC_PRIVATE' | awk '{ print $2 }' | tr '\n' ' ')
  if [ -z "$private" ]; then
    ok "${plugin#"$builddir"/} needs no private symbol"
  else
    fail "${plugin#"$builddir"/} needs private symbols: $private"
  fi
done

# A plugin calling an internal function is refused; the same without the
# call loads. (tfenc_file_same is internal: core/base/files.h.)
mkdir -p "$work/private" "$work/public-only"
cat > "$work/user.c" <<'C'
#include <tfenc/plugin.h>
int tfenc_file_same(const char *a, const char *b);
static int create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    (void)ctx;
#ifdef CALL_PRIVATE
    if (tfenc_file_same(init->name, init->name))
        return TFENC_ERR_INTERNAL;
#endif
    *instance = (void *)init->name;
    return TFENC_OK;
}
static int forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    (void)instance, (void)ctx, (void)batch, (void)workspace;
    return TFENC_OK;
}
static void destroy(void *instance) { (void)instance; }
TFENC_PLUGIN_TYPES("private_user");
static const tfenc_layer_descriptor descriptor = {
    TFENC_DESCRIPTOR_INIT, .type = "private_user", .create = create, .forward = forward,
    .destroy = destroy};
TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);
TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &descriptor : (const tfenc_layer_descriptor *)0;
}
C
build() { # OUTPUT [FLAGS]
  $TFENC_CC -std=c11 -fPIC -shared -I"$srcdir/core/include" $2 -o "$1" "$work/user.c" \
    -L"$builddir/core/.libs" -ltfenc
}
if build "$work/private/private_user.so" -DCALL_PRIVATE && build "$work/public-only/private_user.so" ""; then
  TFENC_PLUGIN_PATH=$work/private "$builddir/drivers/tfenc-batch" --list-plugins > "$work/private.txt" 2>&1
  if grep -q "private_user.so: needs libtfenc symbols of version TFENC_PRIVATE" "$work/private.txt"; then
    ok "a plugin calling tfenc_file_same (TFENC_PRIVATE) is refused"
  else
    fail "a plugin calling a private function is not refused:"; cat "$work/private.txt"
  fi
  TFENC_PLUGIN_PATH=$work/public-only "$builddir/drivers/tfenc-batch" --list-plugins > "$work/public.txt" 2>&1
  if grep -Eq "^  private_user +.*public-only/private_user.so" "$work/public.txt"; then
    ok "the same plugin without the private call loads"
  else
    fail "the plugin without the private call is not loaded:"; cat "$work/public.txt"
  fi
else
  fail "cannot build the test plugin with $TFENC_CC"
fi

[ "$failed" -eq 0 ] && echo "exports: every check passed"
[ "$failed" -eq 0 ]
