# plugin: finding, loading and checking layer plugins (the ABI's host side).
# may use: base job
core_libtfenc_la_SOURCES += \
	core/plugin/plugin_loader.c core/plugin/plugin_loader.h \
	core/plugin/shared_object.c core/plugin/shared_object.h
