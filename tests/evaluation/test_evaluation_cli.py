"""`nooa-mcp eval locomo` end to end on a one-conversation slice built here."""

from __future__ import annotations

import json

from click.testing import CliRunner
from locomo_slice import conversation

from nooa_mcp.cli import main


def test_eval_locomo_prints_every_variant_and_json(tmp_path):
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([conversation()]))
    runner = CliRunner()
    result = runner.invoke(main, ["eval", "locomo", str(path), "--embedder", "hash", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["questions"] == 3 and data["skipped_questions"] == 1 and data["turns"] == 7
    assert list(data["variants"]) == [
        "full",
        "-rec",
        "-imp",
        "-spread",
        "-overlap",
        "cosine-only",
        "bm25-only",
        "rrf",
        "grep",
    ]
    # Keyword-rich questions on seven turns: the full scorer finds every answer in its top 5.
    assert data["variants"]["full"]["R@5"] == 1.0
    assert set(data["variants"]["grep"]["by_category"]) == {"1", "4"}


def test_eval_locomo_table_and_a_clear_error_for_a_bad_file(tmp_path):
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([conversation()]))
    runner = CliRunner()
    table = runner.invoke(main, ["eval", "locomo", str(path), "--embedder", "hash"])
    assert table.exit_code == 0 and "cosine-only" in table.stdout and "R@5" in table.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = runner.invoke(main, ["eval", "locomo", str(bad), "--embedder", "hash"])
    assert result.exit_code != 0 and "not a list of conversations" in result.output


def test_eval_locomo_lets_time_pass_and_forgets_only_what_nobody_asks_for(tmp_path):
    """The time cells: a pass of the shipped maintenance at the real now (years after the
    dated turns) archives nothing and scores as no pass; a year later with nothing asked every
    turn has faded and the archive tier still answers; the simulated clock forgets some."""
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([conversation()]))
    args = ["eval", "locomo", str(path), "--embedder", "hash", "--no-cells", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    cells = data["time_cells"]
    assert set(cells) == {
        "no pass/recall",
        "pass now/recall",
        "pass now/explain",
        "a year unused/recall",
        "clock/recall",
        "no pass, held out/recall",
    }
    for metric in ("evidence_R@5", "MRR"):
        assert abs(cells["pass now/recall"][metric] - cells["no pass/recall"][metric]) <= 0.02
    assert data["forgotten_share"]["pass now"] == 0.0
    assert data["forgotten_share"]["a year unused"] == 1.0
    assert data["forgotten_share"]["clock"] > 0.5
    assert cells["a year unused/recall"]["R@10"] > 0
    # Half of the three questions is the simulated user's; the rest are scored.
    assert cells["clock/recall"]["n"] == cells["no pass, held out/recall"]["n"] == 2


def test_the_progress_bar_counts_every_step_of_a_run(tmp_path):
    import anyio

    from nooa_mcp.embeddings import HashEmbedder
    from nooa_mcp.evaluation.locomo import parse_conversation
    from nooa_mcp.evaluation.locomo_run import run_locomo, total_steps
    from nooa_mcp.evaluation.variants import VARIANTS

    convs = [parse_conversation(conversation())]

    async def run(ingest: str, ask: str, done: list[int]) -> None:
        await run_locomo(
            "slice",
            embedder=HashEmbedder(384),
            conversations=convs,
            variants=VARIANTS[:1],
            progress=done.append,
            ingest=ingest,
            ask=ask,
            cells=False,
            workdir=tmp_path,
        )

    for ingest, ask in [("tool", "explain"), ("import", "explain"), ("import", "recall")]:
        done: list[int] = []
        anyio.run(run, ingest, ask, done)
        assert sum(done) == total_steps(convs, VARIANTS[:1], False, True, ingest, ask)


def test_eval_multiplies_as_a_served_process_does(tmp_path):
    """A server runs one BLAS thread, so its vector index multiplies with BLAS; a process with
    BLAS's worker threads multiplies with einsum (`storage.vectors._kernel`). The evaluation
    measures the product as shipped: it runs the server's kernel, whatever the environment."""
    import os
    import subprocess
    import sys

    path = tmp_path / "slice.json"
    path.write_text(json.dumps([conversation()]))
    script = (
        "import sys\n"
        "from nooa_mcp.cli import main\n"
        "try:\n"
        "    main(['eval', 'locomo', sys.argv[1], '--embedder', 'hash', '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "from nooa_mcp.storage import vectors\n"
        "print('kernel', vectors._kernel().__name__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "kernel _blas_product"
