#!/usr/bin/env bash
# End-to-end check of `nooa-mcp` over stdio with the MCP Inspector CLI.
#
# Runs tools/list, memory_author, memory_recall, memory_explain (dry run and replay), a resource
# read and prompts/list against a fresh store, and asserts on the JSON each one prints.
# Needs: nooa-mcp on PATH (pip install -e .), node + npx (the npm registry), python3 or jq.
#   NOOA_MCP=/path/to/nooa-mcp  NOOA_INSPECTOR=@modelcontextprotocol/inspector@2.12.0
set -euo pipefail

NOOA_MCP="${NOOA_MCP:-nooa-mcp}"
INSPECTOR="${NOOA_INSPECTOR:-@modelcontextprotocol/inspector@2.12.0}"
PY="${PYTHON:-python3}"
command -v "$NOOA_MCP" >/dev/null || { echo "inspector.sh: $NOOA_MCP not found (pip install -e .)" >&2; exit 2; }

workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT
store="$workdir/memory.sqlite"

# One Inspector call: stdout is the JSON result; npm's engine warnings go to a log.
inspect() {
  npx -y "$INSPECTOR" --cli -e HF_HUB_OFFLINE=1 \
    "$NOOA_MCP" --store "$store" --owner e2e@inspector "$@" 2>>"$workdir/inspector.log"
}

# check <label> <python expression over `d` (the parsed JSON)> < json
check() {
  local label="$1" expr="$2" json
  json="$(cat)"
  if ! printf '%s' "$json" | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($expr) else 1)"; then
    echo "FAIL $label: expected $expr" >&2
    printf '%s\n' "$json" | head -c 4000 >&2
    echo >&2
    tail -n 20 "$workdir/inspector.log" >&2 || true
    exit 1
  fi
  echo "ok   $label"
}

inspect --method tools/list | check "tools/list offers the memory tools" \
  '{"memory_author","memory_recall","memory_explain","memory_update","todo","intent"} <= {t["name"] for t in d["tools"]}'

authored="$(inspect --method tools/call --tool-name memory_author \
  --tool-arg 'content=The staging database restarts every night at midnight UTC.' \
  --tool-arg importance=HIGH --tool-arg 'tags=["staging","database"]')"
printf '%s' "$authored" | check "memory_author creates a memory" \
  'd["structuredContent"]["status"] == "created" and not d["isError"]'
id="$(printf '%s' "$authored" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["structuredContent"]["id"])')"

inspect --method tools/call --tool-name memory_recall \
  --tool-arg 'query=when does the staging database restart?' | check "memory_recall ranks it first" \
  "d['structuredContent']['hits'][0]['id'] == '$id'"

inspect --method tools/call --tool-name memory_explain \
  --tool-arg 'query=staging database restart' | check "memory_explain dry-runs the query" \
  "d['structuredContent']['mode'] == 'query' and d['structuredContent']['rows'][0]['id'] == '$id'"

# The Inspector JSON-parses --tool-arg values: quote the id, or "12345678" / "1e400abc"-like
# prefixes arrive as numbers.
inspect --method tools/call --tool-name memory_explain --tool-arg "memory_id=\"${id:0:8}\"" \
  | check "memory_explain replays the recall" \
  "[a['channel'] for a in d['structuredContent']['accesses']] == ['recalled', 'created']"

inspect --method resources/read --uri "memory://memories/${id:0:8}" \
  | check "resources/read returns the memory" \
  "json.loads(d['contents'][0]['text'])['content'].startswith('The staging database') and json.loads(d['contents'][0]['text'])['owner'] == 'e2e@inspector'"

inspect --method resources/templates/list | check "resource templates are listed" \
  '"memory://memories/{memory_id}{?offset}" in {t["uriTemplate"] for t in d["resourceTemplates"]}'

inspect --method prompts/list | check "prompts/list offers the three prompts" \
  '{p["name"] for p in d["prompts"]} == {"memory_guide","session_start","reflect"}'

echo "inspector e2e: all checks passed"
