"""The model file with its word table kept int8 (nooa_mcp/model_file.py): less
resident memory, the same vectors.

The rewrite must change memory, never a vector: the embeddings of the rewritten graph are
compared bit for bit with the wheel's, and a graph the rule does not fit is used as shipped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from nooa_mcp import model_file as mf

RSS_OF_SESSION = """
import sys, ctypes, onnxruntime as ort
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
libc = ctypes.CDLL("libc.so.6")
so = ort.SessionOptions()
so.enable_cpu_mem_arena = False
libc.malloc_trim(0)
before = rss()
session = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
libc.malloc_trim(0)
print(rss() - before)
"""


def session(path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_cpu_mem_arena = False
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("model") / "rewritten.onnx"
    mf.rewrite(mf._source(), target)
    return target


@pytest.mark.real_model
def test_the_rewritten_graph_embeds_bit_for_bit_as_the_shipped_one(rewritten):
    rng = np.random.default_rng(7)
    ids = rng.integers(100, 30_000, size=(3, 24)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 10:] = 0  # a padded row, as in a batch of texts of different lengths
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    shipped, ours = session(mf._source()), session(rewritten)
    names = {i.name for i in shipped.get_inputs()}
    feed = {k: v for k, v in feed.items() if k in names}
    assert np.array_equal(shipped.run(None, feed)[0], ours.run(None, feed)[0])


@pytest.mark.real_model
def test_the_word_table_is_only_read_as_int8_rows(rewritten):
    graph = onnx.load(str(rewritten)).graph
    readers = {n.op_type for n in graph.node if f"{mf.TABLE}weight_q" in n.input}
    assert readers == {"Gather"}
    assert not [n.name for n in graph.node if f"{mf.TABLE}weight" in n.input]


@pytest.mark.real_model
def test_the_rewritten_session_holds_at_least_20_mib_less(rewritten):
    def grown(path: Path) -> float:
        out = subprocess.run(
            [sys.executable, "-c", RSS_OF_SESSION, str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return float(out.stdout)

    shipped, ours = grown(mf._source()), grown(rewritten)
    assert ours < shipped - 20, (shipped, ours)  # measured: 98 against 65 MiB


@pytest.mark.real_model
def test_the_product_embedder_loads_the_rewritten_file(minilm):
    assert minilm.model_path.name.endswith(f"{mf.REWRITE}.onnx")
    assert minilm._session._model_path == str(minilm.model_path)


def tiny_model(path: Path) -> Path:
    """A graph with no word table: the rule does not fit it."""
    node = helper.make_node("Identity", ["x"], ["y"], name="only")
    graph = helper.make_graph(
        [node],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_a_graph_of_another_shape_is_used_as_shipped(tmp_path, monkeypatch, caplog):
    source = tiny_model(tmp_path / "other.onnx")
    monkeypatch.setattr(mf, "_source", lambda: source)
    with pytest.raises(ValueError, match="weight_cast is not Cast"):
        mf.rewrite(source, tmp_path / "out.onnx")
    assert mf.model_file(tmp_path / "cache") == source
    assert "as shipped" in caplog.text
    assert not list((tmp_path / "cache").glob("*.onnx")), "nothing half-written is left"


def test_a_file_onnx_cannot_read_is_used_as_shipped(tmp_path, monkeypatch):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\xff\xff not a model")
    monkeypatch.setattr(mf, "_source", lambda: garbage)
    assert mf.model_file(tmp_path / "cache") == garbage


def test_without_the_onnx_package_the_shipped_file_is_used(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    assert mf.model_file(tmp_path) == mf._source()


def test_a_rewritten_file_is_made_once_and_reused(tmp_path, monkeypatch):
    calls: list[Path] = []

    def fake_rewrite(source: Path, target: Path) -> None:
        calls.append(target)
        target.write_bytes(b"rewritten")

    monkeypatch.setattr(mf, "rewrite", fake_rewrite)
    first = mf.model_file(tmp_path)
    second = mf.model_file(tmp_path)
    assert first == second and first.parent == tmp_path
    assert first.name.endswith(f"{mf.REWRITE}.onnx")
    assert calls == [first]
