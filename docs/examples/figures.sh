#!/bin/sh
# Regenerates the traces, tables and figures in docs/examples/ (run from the repository root).
# test/unit/docs_figures.test.ts runs these same lines and fails if any output drifts from the committed file.
set -e

# The Free-plan burst: 25 requests at 0 s, 8 at 0.5 s, 1 at 2.5 s; token_bucket 10/s, burst 20.
npx sluice gen --burst 25@0 --burst 8@500ms --burst 1@2500ms --out docs/examples/free-burst.csv
npx sluice compare --rules docs/examples/free-burst.yaml --trace docs/examples/free-burst.csv --from 0 --to 3500ms --title "Watching a token bucket decide: the Free plan (10/s, burst 20)" --svg docs/examples/free-burst.svg > docs/examples/free-burst.txt

# One burst across a minute boundary: 10 requests/s from 12:00:50 to 12:01:10, limit 100 per minute.
npx sluice gen --constant 10/s,12:00:50,12:01:10 --out docs/examples/boundary.csv
npx sluice compare --rules docs/examples/boundary.yaml --trace docs/examples/boundary.csv --from 12:00:40 --to 12:01:20 --title "One burst across a minute boundary: four ways to say 100 per minute" --svg docs/examples/boundary.svg > docs/examples/boundary.txt
