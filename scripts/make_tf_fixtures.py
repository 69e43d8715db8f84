"""Regenerate tests/fixtures/tf/: tiny TensorFlow checkpoints in the official ALBERT layout + reference outputs.

Needs TensorFlow, which is NOT a litebert dependency: install it in a separate venv and run

    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu
    /tmp/tfvenv/bin/python scripts/make_tf_fixtures.py            # writes tests/fixtures/tf/

The graph below follows google-research/albert ``modeling.py`` / ``run_pretraining.py`` / ``classifier_utils.py``
(variable scopes, einsum dense layers with [in, out] kernels, LayerNorm/LayerNorm_1 auto-naming, tanh-approximate
gelu, layer norm epsilon 1e-12, -10000 attention mask, tied MLM decoder), so variable names come from TensorFlow's
own scoping rules and the reference outputs from TensorFlow's own kernels: an implementation independent of litebert.
Nothing here imports litebert. Weights are random (seeded), larger than the official init so tests are sensitive.

Fixtures (each folder: checkpoint files, albert_config.json, manifest.json = tf.train.list_variables + dtypes,
reference.npz = inputs and outputs of a forward pass):
  pretrain/    run_pretraining layout: 4 layers, 2 groups x 2 inner groups, MLM + SOP heads, adam_m/adam_v slots,
               global_step; saved in 2 shards (two logical CPU devices, sharded Saver)
  hub/         TF-Hub export layout (``module/`` prefix, variables/variables.*), MLM head; word embeddings stored
               float16 and the pooler kernel bfloat16
  classifier/  run_classifier layout: embedding_size == hidden_size (so no embedding_hidden_mapping_in, as in
               modeling.py), top-level output_weights/output_bias for 3 labels, global_step
  partitioned/ word embeddings saved with a variable partitioner (2 slices): must be reported as unsupported
  dtypes/      one small variable per dtype (float32/64, float16, bfloat16, int32, int64, uint8, bool) with exact
               values in values.npz
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()

OFFICIAL_EXTRA_KEYS = {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0, "down_scale_factor": 1}


def official_config(**kw) -> dict:
    cfg = dict(attention_probs_dropout_prob=0, hidden_act="gelu", hidden_dropout_prob=0, initializer_range=0.02,
               max_position_embeddings=16, type_vocab_size=2, **OFFICIAL_EXTRA_KEYS)
    cfg.update(kw)
    return dict(sorted(cfg.items()))


class Init:
    """Seeded random values for every variable; ``dtypes`` maps full variable names to a storage dtype."""

    def __init__(self, seed: int, dtypes: dict[str, tf.DType] | None = None):
        self.rng = np.random.default_rng(seed)
        self.dtypes = dtypes or {}

    def get(self, name: str, shape: list[int], kind: str = "w"):
        scope = tf1.get_variable_scope().name
        full = f"{scope}/{name}" if scope else name
        if kind == "gamma":
            value = 1.0 + 0.2 * self.rng.standard_normal(shape)
        elif kind == "w":
            value = self.rng.standard_normal(shape) / math.sqrt(max(shape[0], 1)) * 1.5
        else:  # biases, betas, embeddings
            value = 0.3 * self.rng.standard_normal(shape)
        dtype = self.dtypes.get(full, tf.float32)
        var = tf1.get_variable(name, shape, dtype=dtype, initializer=tf1.constant_initializer(value.astype(np.float32)))
        return tf.cast(var, tf.float32) if dtype != tf.float32 else var


def gelu(x):  # modeling.gelu: the tanh approximation
    return x * 0.5 * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


ACTS = {"gelu": gelu, "relu": tf.nn.relu, "tanh": tf.tanh}


def layer_norm(init: Init, x):
    # contrib layer_norm: scope default_name "LayerNorm" (uniquified to LayerNorm_1 ...), epsilon 1e-12
    with tf1.variable_scope(None, default_name="LayerNorm"):
        width = x.shape[-1]
        beta, gamma = init.get("beta", [width], "b"), init.get("gamma", [width], "gamma")
    mean, var = tf.nn.moments(x, [-1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-12)


def dense(init: Init, x, units: int, name: str = "dense", act=None):
    with tf1.variable_scope(name):
        w = init.get("kernel", [x.shape[-1], units])
        b = init.get("bias", [units], "b")
    y = tf.einsum("...H,HO->...O", x, w) + b
    return act(y) if act else y


def attention_ffn_block(init: Init, cfg: dict, x, mask):
    heads, hidden = cfg["num_attention_heads"], cfg["hidden_size"]
    d = hidden // heads
    with tf1.variable_scope("attention_1"):
        with tf1.variable_scope("self"):
            qkv = []
            for name in ("query", "key", "value"):
                with tf1.variable_scope(name):
                    w = tf.reshape(init.get("kernel", [hidden, hidden]), [hidden, heads, d])
                    b = tf.reshape(init.get("bias", [hidden], "b"), [heads, d])
                qkv.append(tf.transpose(tf.einsum("BFH,HND->BFND", x, w) + b, [0, 2, 1, 3]))  # [B,N,F,D]
            q, k, v = qkv
            logits = tf.matmul(q, k, transpose_b=True) / math.sqrt(d)  # [B,N,F,T]
            logits += (1.0 - tf.cast(mask, tf.float32)[:, None, None, :]) * -10000.0
            ctx = tf.transpose(tf.matmul(tf.nn.softmax(logits), v), [0, 2, 1, 3])  # [B,F,N,D]
        with tf1.variable_scope("output"), tf1.variable_scope("dense"):
            w = tf.reshape(init.get("kernel", [hidden, hidden]), [heads, d, hidden])
            b = init.get("bias", [hidden], "b")
            attn = tf.einsum("BFND,NDH->BFH", ctx, w) + b
    attn = layer_norm(init, attn + x)
    with tf1.variable_scope("ffn_1"), tf1.variable_scope("intermediate"):
        inter = dense(init, attn, cfg["intermediate_size"], act=ACTS[cfg["hidden_act"]])
        with tf1.variable_scope("output"):
            ffn = dense(init, inter, hidden)
    return layer_norm(init, ffn + attn)


def albert(init: Init, cfg: dict, ids, mask, types):
    """modeling.AlbertModel: returns (sequence_output [B,L,H], pooled_output [B,H], word embedding table [V,E])."""
    seq = ids.shape[1]
    with tf1.variable_scope("bert"):
        with tf1.variable_scope("embeddings"):
            table = init.get("word_embeddings", [cfg["vocab_size"], cfg["embedding_size"]], "b")
            emb = tf.gather(table, ids)
            tt = init.get("token_type_embeddings", [cfg["type_vocab_size"], cfg["embedding_size"]], "b")
            emb += tf.matmul(tf.one_hot(types, cfg["type_vocab_size"]), tt)
            pos = init.get("position_embeddings", [cfg["max_position_embeddings"], cfg["embedding_size"]], "b")
            emb = layer_norm(init, emb + pos[None, :seq])
        with tf1.variable_scope("encoder"):
            h = emb
            if cfg["embedding_size"] != cfg["hidden_size"]:
                h = dense(init, emb, cfg["hidden_size"], name="embedding_hidden_mapping_in")
            with tf1.variable_scope("transformer", reuse=tf1.AUTO_REUSE):
                for layer in range(cfg["num_hidden_layers"]):
                    group = int(layer / cfg["num_hidden_layers"] * cfg["num_hidden_groups"])
                    with tf1.variable_scope(f"group_{group}"):
                        for inner in range(cfg["inner_group_num"]):
                            with tf1.variable_scope(f"inner_group_{inner}"):
                                h = attention_ffn_block(init, cfg, h, mask)
        with tf1.variable_scope("pooler"):
            pooled = dense(init, h[:, 0], cfg["hidden_size"], act=tf.tanh)
    return h, pooled, table


def mlm_head(init: Init, cfg: dict, h, table):
    """run_pretraining.get_masked_lm_output, applied at every position: logits [B,L,V]."""
    with tf1.variable_scope("cls/predictions"):
        with tf1.variable_scope("transform"):
            x = layer_norm(init, dense(init, h, cfg["embedding_size"], act=ACTS[cfg["hidden_act"]]))
        bias = init.get("output_bias", [cfg["vocab_size"]], "b")
    return tf.einsum("BLH,VH->BLV", x, table) + bias


def pooled_classifier(init: Init, pooled, num_labels: int, scope: str | None):
    """run_pretraining.get_sentence_order_output (scope cls/seq_relationship) / classifier_utils.create_model."""
    with tf1.variable_scope(scope) if scope else _null():
        w = init.get("output_weights", [num_labels, pooled.shape[-1]])
        b = init.get("output_bias", [num_labels], "b")
    return tf.matmul(pooled, w, transpose_b=True) + b


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def example_inputs(cfg: dict, rng: np.random.Generator):
    ids = rng.integers(5, cfg["vocab_size"], size=(2, 7)).astype(np.int32)
    ids[:, 0] = 2  # [CLS]
    mask = np.ones_like(ids)
    mask[1, 5:] = 0
    ids[1, 5:] = 0
    types = np.zeros_like(ids)
    types[0, 4:] = 1
    types[1, 3:5] = 1
    return ids, mask, types


def add_adam_slots(rng: np.random.Generator):
    for v in list(tf1.trainable_variables()):
        name = v.op.name
        for slot in ("adam_m", "adam_v"):
            value = rng.standard_normal(v.shape.as_list()).astype(np.float32) * 1e-3
            tf1.get_variable(f"{name}/{slot}", v.shape,
                             initializer=tf1.constant_initializer(np.abs(value) if slot == "adam_v" else value),
                             trainable=False)


def global_step(step: int):
    tf1.get_variable("global_step", [], dtype=tf.int64, initializer=tf1.constant_initializer(step), trainable=False)


def write_manifest(prefix: Path, out: Path):
    reader = tf1.train.NewCheckpointReader(str(prefix))
    dtypes = reader.get_variable_to_dtype_map()
    manifest = {name: {"dtype": dtypes[name].name, "shape": shape}
                for name, shape in tf1.train.list_variables(str(prefix))}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def model_fixture(out: Path, cfg: dict, *, seed: int, heads: tuple[str, ...], prefix_scope: str | None = None,
                  dtypes: dict | None = None, slots: bool = False, step: int | None = None, shards: int = 1,
                  prefix_name: str = "model.ckpt-best", num_labels: int = 3):
    out.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    ids, mask, types = example_inputs(cfg, rng)
    graph = tf1.Graph()
    with graph.as_default():
        init = Init(seed + 1, dtypes)
        outputs = {}
        devices = [f"/cpu:{i}" for i in range(shards)]
        with tf1.variable_scope(prefix_scope) if prefix_scope else _null():
            with tf.device(devices[0]):
                h, pooled, table = albert(init, cfg, tf.constant(ids), tf.constant(mask), tf.constant(types))
            outputs.update(sequence_output=h, pooled_output=pooled)
            with tf.device(devices[-1]):  # heads in the last shard
                if "mlm" in heads:
                    outputs["mlm_logits"] = mlm_head(init, cfg, h, table)
                if "sop" in heads:
                    outputs["sop_logits"] = pooled_classifier(init, pooled, 2, "cls/seq_relationship")
                if "classifier" in heads:
                    outputs["classifier_logits"] = pooled_classifier(init, pooled, num_labels, None)
                if slots:
                    add_adam_slots(rng)
                if step is not None:
                    global_step(step)
        saver = tf1.train.Saver(sharded=shards > 1)
        with tf1.Session(graph=graph, config=tf1.ConfigProto(device_count={"CPU": shards})) as sess:
            sess.run(tf1.global_variables_initializer())
            values = sess.run(outputs)
            target = out / "variables" / "variables" if prefix_name == "variables" else out / prefix_name
            target.parent.mkdir(exist_ok=True)
            saver.save(sess, str(target), write_meta_graph=False, write_state=False)
    manifest = write_manifest(target, out)
    (out / "albert_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    np.savez(out / "reference.npz", input_ids=ids, attention_mask=mask, token_type_ids=types,
             **{k: v.astype(np.float32) for k, v in values.items()})
    files = sorted(p.name for p in target.parent.iterdir())
    print(f"{out.name}: {len(manifest)} variables, files {files}")


def partitioned_fixture(out: Path):
    out.mkdir(parents=True)
    graph = tf1.Graph()
    with graph.as_default():
        with tf1.variable_scope("bert/embeddings"):
            tf1.get_variable("word_embeddings", [10, 4], partitioner=tf1.fixed_size_partitioner(2),
                             initializer=tf1.random_normal_initializer(seed=7))
            tf1.get_variable("token_type_embeddings", [2, 4], initializer=tf1.zeros_initializer())
        saver = tf1.train.Saver()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            saver.save(sess, str(out / "model.ckpt"), write_meta_graph=False, write_state=False)
    write_manifest(out / "model.ckpt", out)
    print(f"{out.name}: {sorted(p.name for p in out.iterdir())}")


def dtypes_fixture(out: Path):
    out.mkdir(parents=True)
    rng = np.random.default_rng(11)
    values = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64": rng.standard_normal((5,)),
        "f16": rng.standard_normal((2, 3)).astype(np.float16),
        "bf16": rng.standard_normal((4, 2)).astype(np.float32),
        "i32": rng.integers(-2**31, 2**31 - 1, size=(6,)).astype(np.int32),
        "i64": np.array([-(2**62), 2**40 + 3, -1, 0], dtype=np.int64),
        "u8": rng.integers(0, 256, size=(2, 2)).astype(np.uint8),
        "flag": np.array([True, False, True]),
        "scalar/step": np.array(12345, dtype=np.int64),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    tf_dtypes = {"bf16": tf.bfloat16}
    graph = tf1.Graph()
    with graph.as_default():
        vars_ = {n: tf1.Variable(tf.cast(tf.constant(v), tf_dtypes.get(n, tf.as_dtype(v.dtype))), name=n)
                 for n, v in values.items()}
        saver = tf1.train.Saver(vars_)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            stored = sess.run({n: tf.cast(v, tf.float32) if n == "bf16" else v for n, v in vars_.items()})
            saver.save(sess, str(out / "model.ckpt"), write_meta_graph=False, write_state=False)
    write_manifest(out / "model.ckpt", out)
    np.savez(out / "values.npz", **{n.replace("/", "__"): v for n, v in stored.items()})
    print(f"{out.name}: {sorted(p.name for p in out.iterdir())}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tf"))
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pre = official_config(vocab_size=40, embedding_size=8, hidden_size=16, num_attention_heads=2,
                          intermediate_size=24, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    model_fixture(out / "pretrain", pre, seed=1, heads=("mlm", "sop"), slots=True, step=125000, shards=2)
    hub = official_config(vocab_size=40, embedding_size=8, hidden_size=16, num_attention_heads=4,
                          intermediate_size=32, num_hidden_layers=3, num_hidden_groups=1, inner_group_num=1,
                          hidden_act="relu")
    model_fixture(out / "hub", hub, seed=2, heads=("mlm",), prefix_scope="module", prefix_name="variables",
                  dtypes={"module/bert/embeddings/word_embeddings": tf.float16,
                          "module/bert/pooler/dense/kernel": tf.bfloat16})
    cls = official_config(vocab_size=30, embedding_size=16, hidden_size=16, num_attention_heads=2,
                          intermediate_size=32, num_hidden_layers=3, num_hidden_groups=1, inner_group_num=1)
    model_fixture(out / "classifier", cls, seed=3, heads=("classifier",), step=3000, num_labels=3)
    partitioned_fixture(out / "partitioned")
    dtypes_fixture(out / "dtypes")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"total {total / 1024:.0f} KiB in {out}")


if __name__ == "__main__":
    main()
