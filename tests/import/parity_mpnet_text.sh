#!/bin/sh
# all-mpnet-base-v2 from text, through tfenc's tokenizer: see parity_mpnet.sh.
exec "$(dirname "$0")/parity_mpnet.sh" text
