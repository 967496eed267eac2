#!/bin/bash
# The hot-key tier's size (issue 36): lines of src/protocol/*.ts and the isolate's hot-key files, and of them code
# (not blank, not a comment-only line). Files of issue 34 that live in src/protocol (outcome.ts: bans and a call's
# kind; slots.ts: concurrency slots) are counted too, as every measurement since the issue was filed has; `--tier-only`
# leaves them out.
#
#   bash bench/tier_size.sh [--tier-only]        # from the repository's root
set -euo pipefail
cd "$(dirname "$0")/.."
files=(src/protocol/*.ts src/isolate/coalesce.ts src/isolate/coalesce_calls.ts src/isolate/coalesce_types.ts
  src/isolate/key_state.ts src/isolate/delegate_call.ts src/isolate/hot_marks.ts src/isolate/resume.ts)
if [ "${1:-}" = "--tier-only" ]; then
  kept=()
  for f in "${files[@]}"; do case "$f" in src/protocol/outcome.ts | src/protocol/slots.ts) ;; *) kept+=("$f") ;; esac; done
  files=("${kept[@]}")
fi
total=$(cat "${files[@]}" | wc -l)
code=$(cat "${files[@]}" | grep -v '^\s*$' | grep -v '^\s*//' | grep -v '^\s*\*' | grep -v '^\s*/\*\*' | wc -l)
echo "tier_size: ${#files[@]} files, ${total} lines, ${code} code"
