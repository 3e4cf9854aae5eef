# plugin: finding, loading and checking layer plugins (the ABI's host side).
# may use: base job
core_libtfenc_la_SOURCES += \
	core/plugin/plugin_loader.c core/plugin/plugin_loader.h \
	core/plugin/shared_object.c core/plugin/shared_object.h

# The build tree's plugin directory (where an uninstalled build finds its
# own plugins), in a header that only plugin_loader.c includes: as a -D on
# every compile line it made every object depend on where the tree is, so
# a compiler cache missed them all in a clone at another path. Rewritten
# only when the path changes, so that plugin_loader.c is not rebuilt
# whenever Makefile is.
BUILT_SOURCES += core/plugin/build_plugin_dir.h
CLEANFILES += core/plugin/build_plugin_dir.h
core/plugin/build_plugin_dir.h: Makefile
	$(AM_V_GEN)$(MKDIR_P) core/plugin && \
	printf '#define TFENC_BUILD_PLUGIN_DIR "%s/plugins/.libs"\n' '$(abs_top_builddir)' > $@-t && \
	if cmp -s $@-t $@; then rm -f $@-t; else mv $@-t $@; fi
