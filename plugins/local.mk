# plugins fragment: see Makefile.am

# attention: multi-head self-attention (mha) with RoPE and ALiBi.
pkglib_LTLIBRARIES += plugins/attention.la
plugins_attention_la_SOURCES = plugins/attention.c \
	plugins/disentangled_position.c plugins/disentangled_position.h
plugins_attention_la_LDFLAGS = -module -avoid-version -shared \
	-export-symbols-regex '^tfenc_plugin_descriptor$$' $(OPENMP_CFLAGS) $(SANITIZER_FLAGS)
plugins_attention_la_LIBADD = plugins/libattention_kernel.la core/libtfenc.la -lm
# The softmax loops carry `omp simd` pragmas (vectorisation) and `omp
# parallel for` (the rank's one OpenMP pool, which the host's matrix
# products use too); -fno-trapping-math lets the exp clamp become a vector
# select (no code here reads floating-point exception flags).
plugins_attention_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) -fno-trapping-math -ffp-contract=fast
# The fused kernel, a library of its own for its flags in a sanitizer
# build: no instrumentation, its buffers checked once a call instead
# (plugins/attention_kernel.c says why; tests/test_attention compiles the
# file instrumented and checks each access).
noinst_LTLIBRARIES += plugins/libattention_kernel.la
plugins_libattention_kernel_la_SOURCES = plugins/attention_kernel.c plugins/attention_kernel.h \
	plugins/attention_kernel_loops.h
if SANITIZERS
ATTENTION_KERNEL_CHECKS = -fno-sanitize=all -DATTENTION_KERNEL_REGION_CHECKS
endif
plugins_libattention_kernel_la_CFLAGS = $(plugins_attention_la_CFLAGS) $(ATTENTION_KERNEL_CHECKS)

# layers: embedding, sinusoidal, ffn, layernorm, rmsnorm, pooling, classifier, splade,
# lexical_weights, multivector, static_embedding, moe.
pkglib_LTLIBRARIES += plugins/layers.la
plugins_layers_la_SOURCES = plugins/layers.c plugins/layers.h plugins/embedding.c \
	plugins/positional.c plugins/ffn.c plugins/norm.c plugins/pooling.c plugins/classifier.c \
	plugins/splade.c plugins/lexical_weights.c plugins/multivector.c plugins/static_embedding.c plugins/moe.c
plugins_layers_la_LDFLAGS = -module -avoid-version -shared \
	-export-symbols-regex '^tfenc_plugin_descriptor$$' $(OPENMP_CFLAGS) $(SANITIZER_FLAGS)
plugins_layers_la_LIBADD = core/libtfenc.la -lm
# As for attention: `omp simd` loops (LayerNorm, RMSNorm) run over rows on
# the rank's OpenMP pool, and selects replace branches for the clamps in
# tfenc_fast_exp(). C11 mode turns off the contraction of a * b + c into one
# fused multiply-add, which the polynomials of the vector clones
# (tfenc/plugin_math.h) want: it only rounds less.
plugins_layers_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) -fno-trapping-math -ffp-contract=fast
