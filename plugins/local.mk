# plugins fragment: see Makefile.am
