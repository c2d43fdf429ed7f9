#!/usr/bin/env bash
# check_doctor_link.sh PROGRAM ARCHIVE: PROGRAM, linked with doctor's layer
# and nothing of gdunlock p2p's, holds no function or data of ARCHIVE (the
# P2P measurement, its kernels' PTX included): doctor names a pair's P2P
# reasons from their own library (gdu_p2p_reason).
set -euo pipefail
program=$1 archive=$2
pulled=$(comm -12 <(nm --defined-only "$archive" | awk 'NF == 3 && $2 ~ /[TDRB]/ {print $3}' | sort -u) \
                  <(nm --defined-only "$program" | awk 'NF == 3 {print $3}' | sort -u))
if [ -n "$pulled" ]; then
    echo "FAIL: $program holds what $archive defines:" $pulled
    exit 1
fi
echo "PASS: $program holds nothing of $archive"
