#!/usr/bin/env bash
# Mutation testing of every module of nooa_mcp/, one package at a time, each against the tests
# that reach it (scripts/mutation_packages.py says which). mutmut 3 runs, per mutant, only the
# tests that call the mutated function in the test process, so paths a test reaches only in a
# subprocess (a server, a hook) count as "no tests": each package's selection drives them in
# process (MCP tools through an in-memory client, HTTP through the ASGI app, the hook path
# through its functions, PostgreSQL through the store). Not part of .ci/run: a whole package
# takes hours on two busy cores. Needs mutmut 3 (`pip install "mutmut>=3.8,<4"`).
#
#   scripts/mutation.sh domain                  # every mutant of nooa_mcp/domain/
#   scripts/mutation.sh domain --sample 150     # 150 of them drawn with a fixed seed
#   scripts/mutation.sh domain --retest         # after adding tests: re-test what survived
#   scripts/mutation.sh all --sample 100        # each package in turn
#   scripts/mutation.sh core                    # the core modules listed in pyproject.toml
#                                               # (also with no package named)
#   scripts/mutation.sh core --only 'nooa_mcp.domain.accesses*'   # mutants whose name matches
#
# Packages: domain storage services mcp hooks console evaluation top (the modules directly
# under nooa_mcp/), or core. Each runs in .mutation/PACKAGE/ (git-ignored), a copy of the
# sources and tests with its own mutmut state, so packages never invalidate each other's
# verdicts; mutmut re-tests only what changed there. The score printed at the end is mutmut's
# (killed or timed out, of all but skipped); a sampled score says how many were drawn.
# `cd .mutation/PACKAGE && mutmut show NAME` prints one mutant's diff.
#
# --retest keeps the kills and timeouts (an added test can only catch more; a changed function
# is re-mutated by mutmut anyway) and re-tests the survivors and the "no tests". mutmut itself
# would throw every verdict away when the test selection grows, so the stored fingerprint of
# the selection is brought up to date first.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
if ! python -c "import mutmut" 2>/dev/null; then
    echo "mutmut is not installed in this Python: pip install 'mutmut>=3.8,<4'" >&2
    exit 2
fi
packages="domain storage services mcp hooks console evaluation top core"
package="${1:-core}"
if [[ "$package" == -* ]]; then  # no package named: the core modules, as before
    set -- core "$@"
    package=core
fi
if ! [[ " $packages all " == *" $package "* ]]; then
    echo "usage: scripts/mutation.sh PACKAGE [--sample N] [--retest]; PACKAGE is one of:" >&2
    echo "  $packages all" >&2
    exit 2
fi
if [ $# -gt 0 ]; then shift; fi
if [ "$package" = "all" ]; then
    for each in domain storage services mcp hooks console evaluation top; do
        scripts/mutation.sh "$each" "$@" || echo "$each: the run failed" >&2
    done
    exit 0
fi
sample=""
retest=""
only=()
while [ $# -gt 0 ]; do
    case "$1" in
        --sample) sample="$2"; shift 2 ;;
        --retest) retest=1; shift ;;
        --only) only+=("$2"); shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

work=".mutation/$package"
mkdir -p "$work"
# The sources and tests as they are now; mutmut keeps its mutants/ beside them.
for dir in nooa_mcp tests prompts; do
    rsync -a --delete --exclude __pycache__ --exclude artifacts "$dir/" "$work/$dir/"
done
python scripts/mutation_packages.py config "$package" pyproject.toml > "$work/pyproject.toml"

cd "$work"
if [ -n "$retest" ] && [ -d mutants ]; then
    python ../../scripts/mutation_packages.py retest
fi
names=("${only[@]}")
if [ -n "$sample" ]; then
    if ! ls mutants/nooa_mcp >/dev/null 2>&1 || [ -z "$(find mutants -name '*.py.meta' | head -1)" ]; then
        # Generate the mutants and the test associations only: no mutant is named so.
        mutmut run "generate-only-no-such-mutant" >/dev/null 2>&1 || true
    fi
    mapfile -t names < <(python ../../scripts/mutation_packages.py sample "$sample")
    echo "sampled ${#names[@]} mutants (seed 30)"
fi
start=$(date +%s)
uptime
nice -n 10 mutmut run --max-children "${MUTATION_JOBS:-2}" "${names[@]}" || true
uptime
echo "wall time: $(( ($(date +%s) - start) / 60 )) min"
if [ ${#only[@]} -gt 0 ]; then
    python ../../scripts/mutation_packages.py score --match "${only[@]}"
else
    python ../../scripts/mutation_packages.py score "${names[@]}"
fi
