#!/bin/bash
# The hot-key tier's behaviour, as a fingerprint: every row of the cluster SIMULATION below on fixed seeds, each
# row's whole JSON (the ledger of where every token went included, the wall time removed), and the concurrency row
# (bench/ablation_slots.ts). A change that means to do the same (a refactor of src/protocol or the isolate's hot-key
# code) gives a byte-identical file: run it on the tree before and after, and `cmp` the two (docs/testing.md).
#
#   bash bench/tier_fingerprint.sh OUT [PAR]        # from the repository's root; SEEDS (default "0 1000"), ROWS
#
# 33 rows x 2 seeds: about 4 min at PAR=2 on 2 idle cores. A row is RULE/ISOLATES/LOAD/SCENARIO (bench/seed_rows.ts).
set -euo pipefail
out="${1:?usage: bash bench/tier_fingerprint.sh OUT [PAR]}"
par="${2:-1}"
cd "$(dirname "$0")/.."
seeds="${SEEDS:-0 1000}"
rows="${ROWS:-search-origin/1000/400/steady global-rate/1000/10000/steady search-origin/5000/400/steady
global-rate/5000/10000/steady search-origin/1000/400/flash-crowd global-rate/1000/10000/flash-crowd
search-origin/5000/400/flash-crowd global-rate/5000/10000/flash-crowd search-origin/1000/400/growth
global-rate/1000/10000/growth search-origin/5000/400/growth global-rate/5000/10000/growth search-origin/1000/400/churn
global-rate/1000/10000/churn search-origin/5000/400/churn global-rate/5000/10000/churn hot-rate/1000/10000/steady
hot-rate/1000/10000/redeploy hot-window/1000/10000/steady hot-window/1000/10000/redeploy hot-rate/5000/5000/steady
growth-global/1000/10000/steady free-global/5000/10000/steady free-global/1000/10/steady
hot-window/1000/10000/override-change hot-rate/1000/10000/object-restart hot-rate/1000/10000/delegate-restart
hot-window/1000/10000/delegate-restart hot-rate/1000/10000/half-refunded hot-rate/1000/10000/clock-skew
hot-window/1000/10000/churn growth-daily/1000/10000/growth hot-rate/1000/10000/flash-crowd}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jobs=()
for r in $rows; do for s in $seeds; do jobs+=("$r@$s"); done; done
run() {
  local r="${1%@*}" s="${1#*@}" rule iso load sc
  IFS=/ read -r rule iso load sc <<< "$r"
  local f
  f="$2/$(echo "$r@$s" | tr '/' '_')"
  local json
  json=$(SLUICE_SIM_SEED=$s nice -n 5 node --import tsx bench/seed_rows.ts --one "$rule" "$iso" "$load" "${sc//-/ }" \
    2>/dev/null | sed -E 's/,"runSeconds":[0-9.]+//') || json=FAILED
  echo "$r@$s ${json:-FAILED}" > "$f"
}
export -f run
printf '%s\n' "${jobs[@]}" | xargs -P "$par" -I{} bash -c 'run "$@"' _ {} "$tmp"
for j in "${jobs[@]}"; do cat "$tmp/$(echo "$j" | tr '/' '_')"; done > "$out"
for s in $seeds; do echo "slots@$s $(nice -n 5 node --import tsx bench/ablation_slots.ts --seed "$s" 2>/dev/null)"; done >> "$out"
echo "tier_fingerprint: $(wc -l < "$out") rows -> $out ($(grep -c ' FAILED$' "$out" || true) failed)"
