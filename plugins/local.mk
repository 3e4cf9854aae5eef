# plugins fragment: see Makefile.am

# layers: embedding, sinusoidal, ffn, layernorm, rmsnorm, pooling.
pkglib_LTLIBRARIES += plugins/layers.la
plugins_layers_la_SOURCES = plugins/layers.c plugins/layers.h plugins/embedding.c \
	plugins/positional.c plugins/ffn.c plugins/norm.c plugins/pooling.c
plugins_layers_la_LDFLAGS = -module -avoid-version -shared \
	-export-symbols-regex '^tfenc_plugin_descriptor$$' $(SANITIZER_FLAGS)
plugins_layers_la_LIBADD = core/libtfenc.la -lm
