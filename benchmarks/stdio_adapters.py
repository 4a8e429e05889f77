"""How the stdio benchmark writes and recalls a memory on each MCP server it measures.

Every server gets the same texts and the same queries; an adapter only maps "store this
memory about this person" and "find what you know about this question" onto the server's
own tools, and says how to start it with a fresh, empty store in a given directory.

- `nooa`: memory_author(content, entities=[speaker]) and memory_recall(query, k=5).
- `reference`: the MCP reference memory server (@modelcontextprotocol/server-memory, Node):
  one entity per speaker (create_entities the first time, add_observations after), and
  search_nodes(query), which is a case-insensitive substring match over the whole graph.
- any other command: `--server 'name=X;cmd=COMMAND {dir};author=TOOL.ARG;recall=TOOL.ARG'`,
  optionally `env.KEY=VALUE` and `author_extra`/`recall_extra` (JSON objects merged into the
  arguments). `{dir}` is replaced by the fresh data directory.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stdio_client import StdioServer
from stdio_workload import Item

#: Where the reference server is installed (`npm install --prefix $PEERS
#: @modelcontextprotocol/server-memory`); NOOA_BENCH_PEERS overrides it.
PEERS = Path(os.environ.get("NOOA_BENCH_PEERS", "/work/scratch/peers"))
REFERENCE_JS = PEERS / "node_modules/@modelcontextprotocol/server-memory/dist/index.js"


class Adapter:
    """A server under test: its command and its two verbs."""

    name = "server"
    #: False when the server loses writes if calls overlap: the benchmark then sends one at a time
    concurrent_writes = True
    #: how `prefill` fills a store, printed next to every figure measured on one
    prefill_how = ""

    def argv(self, data_dir: Path) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    async def warm(self, server: StdioServer) -> None:
        """Whatever a fair measurement waits for once (a model load); default nothing."""

    async def author(self, server: StdioServer, item: Item) -> bool:
        """Write one memory; True when the server says it stored a new one."""
        raise NotImplementedError

    async def recall(self, server: StdioServer, query: str) -> int:
        """Ask one query; the number of hits (-1 when the reply does not say)."""
        raise NotImplementedError

    def prefill(self, data_dir: Path, items: list[Item]) -> int:
        """Add `items` to the store in `data_dir` without MCP calls; returns how many of
        them were stored (near-duplicates and repeats are not)."""
        raise SystemExit(f"{self.name} has no prefill; drop --prefill or measure nooa only.")


class Nooa(Adapter):
    name = "nooa"
    prefill_how = "nooa-mcp import (author_many in batches of 256, not the client path)"

    def __init__(self, command: str) -> None:
        self.command = command

    def argv(self, data_dir: Path) -> tuple[list[str], dict[str, str]]:
        store = data_dir / "store.sqlite"
        return [self.command, "--store", str(store), "--owner", "bench"], {"HF_HUB_OFFLINE": "1"}

    async def warm(self, server: StdioServer) -> None:
        # A recall sent while the model loads is answered from full-text search alone; wait
        # until one says the model is ready, so no figure mixes the two.
        deadline = time.perf_counter() + 120
        while time.perf_counter() < deadline:
            result = await server.call("memory_recall", {"query": "warm-up", "k": 1})
            if result["structuredContent"].get("embeddings") == "ready":
                return
        raise SystemExit("nooa-mcp: the embedding model was not ready after 120 s.")

    async def author(self, server: StdioServer, item: Item) -> bool:
        result = await server.call(
            "memory_author", {"content": item.content, "entities": [item.speaker]}
        )
        return result["structuredContent"]["status"] in ("created", "revived")

    async def recall(self, server: StdioServer, query: str) -> int:
        result = await server.call("memory_recall", {"query": query, "k": 5})
        return len(result["structuredContent"]["hits"])

    def prefill(self, data_dir: Path, items: list[Item]) -> int:
        source = data_dir / "prefill.jsonl"
        with source.open("w", encoding="utf-8") as out:
            for item in items:
                out.write(json.dumps({"content": item.content, "entities": [item.speaker]}) + "\n")
        argv, env = self.argv(data_dir)
        done = subprocess.run(
            [*argv, "import", str(source), "--json"],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            check=True,
            text=True,
        )
        source.unlink()
        counts = json.loads(done.stdout)
        return int(counts.get("created", 0)) + int(counts.get("revived", 0))


class Reference(Adapter):
    name = "reference"
    # Every call reads memory.jsonl, changes it and writes it back: two calls in flight lose
    # one another's writes (an entity created by one is gone after the other saves).
    concurrent_writes = False
    prefill_how = "memory.jsonl written directly in the server's own file format"

    def __init__(self, script: Path = REFERENCE_JS) -> None:
        if not script.exists():
            raise SystemExit(
                f"{script} does not exist; install it with "
                f"`npm install --prefix {PEERS} @modelcontextprotocol/server-memory` "
                "(or point NOOA_BENCH_PEERS at the folder it is installed in)."
            )
        self.script = script
        self.known: set[str] = set()

    def argv(self, data_dir: Path) -> tuple[list[str], dict[str, str]]:
        graph = data_dir / "memory.jsonl"
        lines = graph.read_text(encoding="utf-8").splitlines() if graph.exists() else []
        self.known = {json.loads(line)["name"] for line in lines if line.strip()}
        return ["node", str(self.script)], {"MEMORY_FILE_PATH": str(graph)}

    async def author(self, server: StdioServer, item: Item) -> bool:
        if item.speaker not in self.known:
            self.known.add(item.speaker)
            result = await server.call(
                "create_entities",
                {
                    "entities": [
                        {
                            "name": item.speaker,
                            "entityType": "person",
                            "observations": [item.content],
                        }
                    ]
                },
            )
            return bool(result["structuredContent"]["entities"])
        result = await server.call(
            "add_observations",
            {"observations": [{"entityName": item.speaker, "contents": [item.content]}]},
        )
        return bool(result["structuredContent"]["results"][0]["addedObservations"])

    async def recall(self, server: StdioServer, query: str) -> int:
        result = await server.call("search_nodes", {"query": query})
        return len(result["structuredContent"]["entities"])

    def prefill(self, data_dir: Path, items: list[Item]) -> int:
        graph = data_dir / "memory.jsonl"
        lines = graph.read_text(encoding="utf-8").splitlines() if graph.exists() else []
        entities: dict[str, dict[str, Any]] = {}
        for line in lines:
            if line.strip():
                entity = json.loads(line)
                entities[entity["name"]] = entity
        added = 0
        for item in items:
            entity = entities.setdefault(
                item.speaker,
                {
                    "type": "entity",
                    "name": item.speaker,
                    "entityType": "person",
                    "observations": [],
                },
            )
            if item.content not in entity["observations"]:
                entity["observations"].append(item.content)
                added += 1
        graph.write_text("\n".join(json.dumps(e) for e in entities.values()), encoding="utf-8")
        return added


class Generic(Adapter):
    """Any MCP server, described on the command line (see the module docstring)."""

    def __init__(self, spec: str) -> None:
        fields: dict[str, str] = {}
        for part in spec.split(";"):
            key, sep, value = part.partition("=")
            if not sep:
                raise SystemExit(f"--server {spec!r}: '{part}' is not key=value.")
            fields[key.strip()] = value.strip()
        missing = [k for k in ("name", "cmd", "author", "recall") if k not in fields]
        if missing:
            raise SystemExit(f"--server {spec!r}: add {', '.join(missing)} (key=value; ...).")
        self.name = fields["name"]
        self.cmd = fields["cmd"]
        self.env = {k[4:]: v for k, v in fields.items() if k.startswith("env.")}
        self.author_tool, self.author_arg = self._tool(fields["author"], spec)
        self.recall_tool, self.recall_arg = self._tool(fields["recall"], spec)
        self.author_extra = json.loads(fields.get("author_extra", "{}"))
        self.recall_extra = json.loads(fields.get("recall_extra", "{}"))

    @staticmethod
    def _tool(value: str, spec: str) -> tuple[str, str]:
        tool, sep, arg = value.rpartition(".")
        if not sep:
            raise SystemExit(f"--server {spec!r}: write tools as TOOL.ARGUMENT, not {value!r}.")
        return tool, arg

    def argv(self, data_dir: Path) -> tuple[list[str], dict[str, str]]:
        argv = [a.replace("{dir}", str(data_dir)) for a in shlex.split(self.cmd)]
        env = {k: v.replace("{dir}", str(data_dir)) for k, v in self.env.items()}
        return argv, env

    async def author(self, server: StdioServer, item: Item) -> bool:
        await server.call(self.author_tool, {**self.author_extra, self.author_arg: item.content})
        return True

    async def recall(self, server: StdioServer, query: str) -> int:
        await server.call(self.recall_tool, {**self.recall_extra, self.recall_arg: query})
        return -1


class Bare(Adapter):
    """benchmarks/bare_server.py: the SDK's minimal server, for the floors only."""

    name = "bare"

    def argv(self, data_dir: Path) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, str(Path(__file__).with_name("bare_server.py"))], {}


def adapter(spec: str, nooa_command: str) -> Adapter:
    if spec == "nooa":
        return Nooa(nooa_command)
    if spec == "reference":
        return Reference()
    if spec == "bare":
        return Bare()
    return Generic(spec)
