# install tests (fragment owned by its issue; see Makefile.am)
