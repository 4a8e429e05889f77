"""Embedders: the real bundled MiniLM offline, and the deterministic test double."""

import os

import numpy as np
import pytest

from nooa_mcp import Memory
from nooa_mcp.embeddings import (
    ONE_BY_ONE_BELOW,
    TOKENIZER_DIR,
    Embedder,
    HashEmbedder,
    WarmingEmbedder,
)

pytestmark = pytest.mark.anyio


def test_the_tokenizer_files_and_licence_ship_inside_the_package():
    names = {p.name for p in TOKENIZER_DIR.iterdir()}
    assert {"tokenizer.json", "tokenizer_config.json", "config.json", "LICENSE", "NOTICE"} <= names


def test_hash_embedder_is_deterministic_normalised_and_shares_words():
    e = HashEmbedder()
    a, b, c = e.embed(["red apple pie", "red apple tart", "quantum tunnelling"])
    assert isinstance(e, Embedder)
    assert np.allclose(e.embed(["red apple pie"])[0], a)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert a @ b > a @ c


def test_warming_embedder_reports_a_failed_load():
    def broken():
        raise OSError("model file missing")

    warming = WarmingEmbedder(broken, "x", 8)
    with pytest.raises(RuntimeError, match="model file missing"):
        warming.wait(5)
    assert not warming.ready


def test_a_held_load_begins_on_release_or_when_a_caller_needs_the_model():
    """A stdio server holds the load while it answers the calls that woke it: started and
    held, the factory is not run; a look (`wait(0)`) does not release it; `release`, or a
    caller that must have the model (`embed`, `wait()`), does."""
    import threading

    for let_go in ("release", "embed"):
        begun = threading.Event()

        def factory(begun: threading.Event = begun) -> HashEmbedder:
            begun.set()
            return HashEmbedder(8)

        warming = WarmingEmbedder(factory, "hash-8", 8, start=False)
        warming.hold()
        warming.start()
        assert not warming.wait(0)
        assert not begun.wait(0.3)
        assert not warming.ready
        if let_go == "release":
            warming.release()
            assert begun.wait(5)
            assert warming.wait(5)
        else:
            assert warming.embed(["red apple"]).shape == (1, 8)
        assert warming.ready


@pytest.mark.real_model
def test_minilm_runs_offline_with_384_normalised_dimensions(minilm):
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    vectors = minilm.embed(["The cat sat on the mat", "A feline rested on a rug", "Tax forms"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1, 1, 1], abs=1e-4)
    assert vectors[0] @ vectors[1] > 0.45
    assert vectors[0] @ vectors[2] < 0.2


@pytest.mark.real_model
def test_minilm_sessions_stop_spinning_after_a_run_and_other_sessions_keep_the_defaults(minilm):
    """The model's session spins inside a run and stops once it returns (SESSION_CONFIG),
    fully optimised, without the arena; sessions built elsewhere keep onnxruntime's
    defaults."""
    import onnxruntime as ort

    session = minilm._session
    assert isinstance(session, ort.InferenceSession)
    options = session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert options.enable_cpu_mem_arena is False
    with pytest.raises(RuntimeError, match="allow_spinning"):
        ort.SessionOptions().get_session_config_entry("session.intra_op.allow_spinning")


def _fastembed_vectors(minilm, texts: list[str], *, together: bool = False) -> np.ndarray:
    """The same model file through fastembed's pipeline (a test-only dependency): its
    tokenizer set-up, mean pooling and normalisation, one text a run (or all in one batch)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    name = "nooa-test/all-MiniLM-L6-v2-int8"
    if name not in {m["model"] for m in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
            dim=384,
            model_file=str(minilm.model_path),
        )
    reference = TextEmbedding(
        name,
        specific_model_path=str(TOKENIZER_DIR),
        local_files_only=True,
        cache_dir=str(minilm.model_path.parent),
    )
    if together:
        return np.stack(list(reference.embed(texts, batch_size=len(texts))))
    return np.stack([next(iter(reference.embed([t], batch_size=1))) for t in texts])


@pytest.mark.real_model
def test_minilm_vectors_are_fastembeds_bit_for_bit(minilm):
    """The sentence vector computed here (tokenizer from its config, mean over real tokens,
    float64 normalisation) is the one fastembed computed for the same file, to the last bit:
    stores embedded before keep their meaning. Texts past 256 tokens are cut as it cuts."""
    texts = [
        "The cat sat on the mat",
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "",
        "   ",
        "deploy " * 400,
        "Ünïcödé — 東京 🚀 naïve café",
        "[CLS] [SEP] [PAD] [MASK] tokens in the text",
    ]
    ours = np.stack([minilm._run([t])[0] for t in texts])
    assert ours.dtype == np.float32
    assert np.array_equal(ours, _fastembed_vectors(minilm, texts))
    # In one padded batch too: the padding's token vectors are left out of the mean.
    batch = [texts[0], texts[1], texts[5]]
    assert np.array_equal(minilm._run(batch), _fastembed_vectors(minilm, batch, together=True))


@pytest.mark.real_model
def test_minilm_single_queries_match_batches(minilm):
    """The model keeps no texts: a cache shared by every role was a timing oracle across
    roles (the engine keeps queries per role, `test_embedding_cache_per_role.py`)."""
    batch = minilm.embed(["where is the deploy key", "something else"])
    single = minilm.embed(["where is the deploy key"])
    assert single[0] @ batch[0] == pytest.approx(1.0, abs=1e-4)
    assert not any(isinstance(v, dict) and v for v in vars(minilm).values())


@pytest.mark.real_model
def test_a_batch_is_embedded_shortest_first_and_returned_in_the_order_given(minilm):
    """Batches are sorted by length against padding; each row must still be its own text's."""
    texts = [
        "A long note about the deploy pipeline, its nightly builds and the staging database "
        "that restarts at midnight while the backups run after it.",
        "Tax forms",
        "The cat sat on the mat",
        "Where is the deploy key kept these days, and who rotated it last?",
    ]
    batch = minilm.embed(texts)
    for i, text in enumerate(texts):
        alone = minilm._run([text])[0]
        assert batch[i] @ alone / np.linalg.norm(alone) == pytest.approx(1.0, abs=1e-5)
    assert batch[1] @ batch[2] < 0.5 and batch[0] @ batch[3] > batch[0] @ batch[1]


@pytest.mark.real_model
def test_a_few_texts_run_one_at_a_time_and_many_in_one_sorted_batch(minilm, monkeypatch):
    """A batch is padded to its longest text: a few texts of mixed lengths (concurrent
    writes sharing a batch) ran slower together than one at a time."""
    runs: list[int] = []
    model_run = minilm._run

    def counting(texts):
        runs.append(len(texts))
        return model_run(texts)

    monkeypatch.setattr(minilm, "_run", counting)
    few = [
        "Tax forms",
        "A longer note about the nightly deploy pipeline and the staging database behind it",
        "The cat sat on the mat",
    ]
    rows = minilm.embed(few)
    assert runs == [1, 1, 1]
    for row, text in zip(rows, few, strict=True):
        assert np.array_equal(row, minilm._run_one(text))  # each exactly its own text's
    runs.clear()
    many = [f"note {i}: " + "more words " * (i % 7) for i in range(ONE_BY_ONE_BELOW)]
    assert minilm.embed(many).shape == (ONE_BY_ONE_BELOW, 384)
    assert runs == [ONE_BY_ONE_BELOW]


@pytest.mark.real_model
async def test_real_model_recall_puts_the_relevant_memory_first_among_distractors(
    store_path, minilm
):
    """A paraphrased query, no shared keywords with the target beyond meaning."""
    async with Memory.open(store_path, owner="coder@laptop", embedder=minilm) as mem:
        target = (
            await mem.author(
                "The production SSH keys are stored in the team vault", importance="HIGH"
            )
        ).id
        for text in [
            "Lunch orders are due by 11am on Fridays",
            "The staging cluster has three worker nodes",
            "Marta prefers code reviews in the morning",
            "Our logo uses the colour teal",
            "The CI pipeline caches pip downloads",
            "Quarterly planning happens in the first week of March",
        ]:
            await mem.author(text)
        result = await mem.recall("where do we keep the credentials for prod servers?")
        assert result.embeddings == "ready"
        assert result.hits[0].id == target
        assert result.hits[0].components.cos > 0.3
        assert not result.hits[0].flags.weak
        assert result.hits[-1].flags.weak


@pytest.mark.real_model
async def test_real_model_near_duplicate_is_stored_and_named_with_its_difference(
    store_path, minilm
):
    """DESIGN.md §4.2-4.3 on the real model: a rewording and a changed value are both stored; the
    reply names the closest memory and what differs."""
    async with Memory.open(store_path, owner="a", embedder=minilm) as mem:
        first = await mem.author("The deploy script lives in tools/deploy.sh")
        again = await mem.author("The deploy script lives in tools/deploy.sh.")
        limit = await mem.author("The API rate limit is 100 requests per minute")
        raised = await mem.author("The API rate limit is 500 requests per minute")
        assert again.status == "created" and again.id != first.id
        assert again.similar_to.id == first.id and again.similar_to.differs_in == []
        assert raised.status == "created" and raised.similar_to.id == limit.id
        assert raised.similar_to.differs_in == ["number"]
        hits = [h.id for h in (await mem.recall("API rate limit", k=5)).hits]
        assert {limit.id, raised.id} <= set(hits[:2])
