# Manual pages: tfenc-batch(1), tfenc-import(1), tfenc-plugin(7).
