# Manual pages: tfenc-batch(1), tfenc-import(1), tfenc-export(1),
# tfenc-plugin(7), written in mdoc(7) by hand (man(1) renders them; no build
# step).
dist_man_MANS = man/tfenc-batch.1 man/tfenc-import.1 man/tfenc-export.1 man/tfenc-plugin.7
