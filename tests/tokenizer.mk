# tests fragment: see Makefile.am
