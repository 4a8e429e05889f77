#!/usr/bin/env bash
# Mutation testing over the core modules (issue 15): scoring, ranking, scope, references,
# tombstones, dedup and reply bounds. The modules and the tests are in pyproject.toml
# ([tool.mutmut]); mutmut runs, per mutant, only the tests that call the mutated function.
# Takes about an hour on two busy cores, so it is not part of .ci/run; its score is quoted in
# BENCHMARKS.md. Needs mutmut 3 (`pip install "mutmut>=3.8,<4"`) in the active venv.
#
#   scripts/mutation.sh                 # a full run, then the score and the survivors
#   scripts/mutation.sh 'nooa_mcp.domain.scope*'   # only mutants whose name matches
#   scripts/mutation.sh --retest        # after adding tests: re-test every mutant not killed
#
# --retest keeps the kills and timeouts (an added test can only catch more; a changed function
# is re-mutated by mutmut anyway) and re-tests the survivors and the "no tests". mutmut itself
# would throw every verdict away when the test selection in pyproject.toml grows, so the
# stored fingerprint of the selection is brought up to date first.
#
# mutmut keeps its results in mutants/ (git-ignored) and re-tests only what changed; delete
# mutants/ for a run from scratch. `mutmut show <name>` prints one mutant's diff.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
if ! python -c "import mutmut" 2>/dev/null; then
    echo "mutmut is not installed in this Python: pip install 'mutmut>=3.8,<4'" >&2
    exit 2
fi
if [ "${1:-}" = "--retest" ]; then
    shift
    python - <<'PY'
import json
from pathlib import Path

from mutmut.configuration import config

stats_path = Path("mutants/mutmut-stats.json")
stats = json.loads(stats_path.read_text())
stats["config_fingerprint"]["test_selection"] = config().config_fingerprint()["test_selection"]
stats_path.write_text(json.dumps(stats))
reset = 0
for meta in Path("mutants").rglob("*.py.meta"):
    data = json.loads(meta.read_text())
    codes = data["exit_code_by_key"]
    for key, code in codes.items():
        # Killed, timed out (the tests hung on the mutant) or caught by a type check: kept.
        if code not in (1, 3, 36, 24, -24, 152, 255, 37):
            codes[key] = None
            reset += 1
    meta.write_text(json.dumps(data))
print(f"re-testing {reset} mutants that were not killed")
PY
fi
start=$(date +%s)
uptime
nice -n 10 mutmut run --max-children "${MUTATION_JOBS:-2}" "$@" || true
uptime
echo "wall time: $(( ($(date +%s) - start) / 60 )) min"
mutmut export-cicd-stats >/dev/null
python - <<'PY'
import json
from pathlib import Path

s = json.loads(Path("mutants/mutmut-cicd-stats.json").read_text())
# mutmut's own score (as in `mutmut badge`): killed or timed out, of all but skipped mutants.
# A mutant no selected test reaches ("no tests") or a suspicious one counts as not killed.
tested = s["total"] - s["skipped"]
caught = s["killed"] + s["timeout"]
print(json.dumps(s))
print(f"mutation score: {caught / max(tested, 1):.1%} ({caught} of {tested} mutants killed)")
PY
mutmut results
