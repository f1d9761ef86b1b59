#!/usr/bin/env bash
# summary.sh REPORT_DIR — the closing note of a conformance run from its JUnit reports.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The serial rerun last: it decides the specs it reran (junitsummary).
mapfile -t reports < <(find "$1" -name 'junit_*.xml' -not -path '*/rerun-serial/*' | sort; find "$1" -path '*/rerun-serial/*' -name 'junit_*.xml')
((${#reports[@]})) || { echo "summary: no JUnit report under $1 (see $1/*/e2e.log)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
bin=${CONF_BIN:-$("$here/build.sh")}
"$bin/junitsummary" "${reports[@]}" | tee "$1/summary.txt"
