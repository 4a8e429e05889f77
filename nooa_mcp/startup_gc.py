"""Python's cyclic garbage collector, paused while a server starts and resumed once it is warm.

A stdio server spends its first second importing: the MCP SDK, pydantic models by the
hundred, numpy, then onnxruntime and the tokenizer behind the first call. Every import allocates
container objects, and the collector, triggered every 700 of them, walks the whole growing
heap again and again: a third of the time to the first answer went to collections that found
next to nothing (BENCHMARKS.md, "Start-up and first search"). Module objects are not garbage.

So `nooa-mcp` pauses the collector before its imports (`pause`), and the server resumes it
(`resume`) once the warm-up is over: the model loaded and the stored vectors read, or a time
limit. Resuming collects once, then freezes what survived (`gc.freeze`): the modules, the
model's Python objects and the index are never walked again, so later collections, which
land on recalls at random, stay short. Reference counting frees everything else meanwhile;
only objects in reference cycles wait for the resume.

Only what `pause` paused is resumed: a program that embeds nooa-mcp and turned the collector
off itself keeps it off. Standard library only: the hooks' start-up budget imports nothing.
"""

from __future__ import annotations

import gc

__all__ = ["pause", "paused", "resume"]

_paused = False


def pause() -> None:
    """Stop automatic collection, if it runs, until `resume`."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def paused() -> bool:
    """Whether `pause` stopped the collector and `resume` has not restarted it yet."""
    return _paused


def resume() -> None:
    """Collect once, freeze the survivors and restart automatic collection (if `pause`
    stopped it; otherwise nothing)."""
    global _paused
    if not _paused:
        return
    _paused = False
    gc.collect()
    gc.freeze()
    gc.enable()
