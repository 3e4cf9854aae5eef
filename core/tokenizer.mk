# core fragment: see Makefile.am
