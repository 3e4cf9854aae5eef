# drivers fragment: see Makefile.am
