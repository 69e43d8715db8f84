"""``litebert convert``: turn checkpoints made elsewhere into litebert / HF model folders.

    litebert convert tf --checkpoint PATH/model.ckpt-best --config albert_config.json [--spm 30k-clean.model] --out DIR
    litebert convert tf --checkpoint PATH --list          # the variables, as tf.train.list_variables shows them

No TensorFlow is needed: the checkpoint is read by `litebert.io.tf_checkpoint`.
"""

from __future__ import annotations

import argparse

from litebert.errors import ConfigError


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    tf = sub.add_parser("tf", help="an official TensorFlow ALBERT checkpoint or TF-Hub module (no TensorFlow needed)",
                        description="Convert an official TensorFlow ALBERT checkpoint (google-research/albert, "
                                    "TF-Hub module) into an HF-format folder: config.json, model.safetensors and, "
                                    "with --spm, the tokenizer.")
    tf.add_argument("--checkpoint", required=True,
                    help="checkpoint prefix (model.ckpt-best), its .index file, a folder holding one checkpoint, "
                         "or a TF-Hub module folder (with variables/variables.index)")
    tf.add_argument("--config", help="the official albert_config.json")
    tf.add_argument("--out", help="output folder (created; a folder already holding a converted model needs "
                                  "--overwrite)")
    tf.add_argument("--overwrite", action="store_true",
                    help="--out holds a model written by `litebert convert`: replace it")
    tf.add_argument("--spm", help="the tokenizer to save in the folder: a SentencePiece model (e.g. 30k-clean.model) "
                                  "or a BERT-style vocabulary (e.g. the Chinese models' vocab_chinese.txt)")
    from litebert.io.convert_tf import HEADS

    tf.add_argument("--head", default="auto", choices=["auto", *HEADS],
                    help="model class to write; auto picks it from the variables present (fine-tuned classifier > "
                         "SQuAD > pretraining MLM+SOP > MLM > bare encoder)")
    tf.add_argument("--no-verify", dest="verify", action="store_false", help="skip the CRC32C check of each tensor")
    tf.add_argument("--list", action="store_true", help="list the checkpoint's variables (name, dtype, shape) and exit")
    from litebert.push import add_arguments as add_hub_arguments

    add_hub_arguments(tf)


def run(args: argparse.Namespace) -> int:
    if args.source != "tf":  # argparse only offers "tf"
        raise ConfigError(f"unknown source {args.source!r}")
    from litebert.io.tf_checkpoint import TFCheckpoint

    if args.list:
        ckpt = TFCheckpoint(args.checkpoint)
        for name in ckpt.names():
            e = ckpt.entry(name)
            note = f"  (partitioned into {len(e.slices)} slices)" if e.partitioned else ""
            print(f"{name}\t{e.dtype}\t{list(e.shape)}{note}")
        return 0
    if not args.config or not args.out:
        raise ConfigError("convert tf needs --config (the official albert_config.json) and --out (the folder to "
                          "write), or --list")
    from litebert.io.convert_tf import convert_tf_checkpoint
    from litebert.push import publishing

    publish = publishing(args)
    result = convert_tf_checkpoint(args.checkpoint, args.config, args.out, head=args.head, spm=args.spm,
                                   verify=args.verify, overwrite=args.overwrite, progress=True, card=publish.card,
                                   push_to_hub=publish.repo_id, hub_private=publish.private)
    print(result.summary())
    print(f"wrote {args.out}" + (" (with tokenizer)" if args.spm else ""))
    return 0
