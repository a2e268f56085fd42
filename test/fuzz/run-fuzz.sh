#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its seed corpus (ctest: test/fuzz/CMakeLists.txt).
# Usage: run-fuzz.sh BINARY SEED_DIR SECONDS ARTIFACT_DIR [WHY_MISSING]
# Exit: 0 no finding; 77 (ctest: skipped) without a fuzzer binary; else a finding (its input is kept in
# ARTIFACT_DIR, replay it with: BINARY FILE).
set -u
bin=$1 seeds=$2 seconds=$3 artifacts=$4 why=${5:-}
if [[ -z $bin || ! -x $bin ]]; then
  echo "SKIPPED: no fuzzer binary: ${why:-clang with libFuzzer was not found when the build was configured}"
  exit 77
fi
[[ -d $seeds ]] || { echo "run-fuzz.sh: no seed corpus at $seeds" >&2; exit 2; }
mkdir -p "$artifacts"
# New inputs go to a scratch corpus; the seeds in the repository are only read.
scratch=$(mktemp -d /tmp/sandlet-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# libFuzzer's own exit code for a finding is 77 by default, which ctest would take for a skip.
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
  -max_len=16384 -print_final_stats=1 -artifact_prefix="$artifacts/" "$scratch" "$seeds" 2>&1 |
  grep -v -e '^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\)' -e '^"' -e 'NEW_FUNC' -e 'dictionary\. #'
rc=${PIPESTATUS[0]}
if [[ $rc -ne 0 ]]; then
  echo "run-fuzz.sh: $(basename "$bin") found a failing input (exit $rc); see $artifacts" >&2
  exit 1
fi
