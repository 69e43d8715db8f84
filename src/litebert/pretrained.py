"""`PretrainedMixin`: ``save_pretrained`` / ``from_pretrained`` in the HF folder layout for the encoder and every head.

The folder format lives in `litebert.io.hf_folder`, imported only when a model is saved or loaded, so that the
reference model (`litebert.model`) imports no conversion code.
"""

from __future__ import annotations


class PretrainedMixin:
    """save_pretrained / from_pretrained in the HF folder layout (config.json + model.safetensors)."""

    HF_ARCHITECTURE = ""  # the HF class name written to config.json "architectures"
    # Whether the loss can read the encoder's outputs at padded positions. When it cannot (MLM and token losses ignore
    # them through -100 labels, pooled heads read [CLS] only), a training loop may skip the padding (pass a
    # `litebert.padding.Packing`): the same loss and gradients, less work.
    LOSS_READS_PADDING = False

    def save_pretrained(self, path) -> None:
        from litebert.io.hf_folder import save_pretrained

        save_pretrained(self, path)

    @classmethod
    def from_pretrained(cls, path, *, strict: bool = False, **config_overrides):
        """Load from a litebert or HF folder. The encoder loads into any head; head weights the folder lacks are
        newly initialised and reported (``strict=True`` makes any missing or unexpected key an error).
        ``config_overrides`` replace config fields first (e.g. ``num_labels=3``, ``hidden_dropout_prob=0.1``)."""
        from litebert.io.hf_folder import from_pretrained

        return from_pretrained(cls, path, strict=strict, **config_overrides)

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        """Recompute each depth step's activations in the backward pass (less memory, about 30% more compute)."""
        getattr(self, "albert", self).encoder.gradient_checkpointing = enabled

    def num_parameters(self) -> int:
        """Unique parameters (the tied MLM decoder and shared blocks counted once)."""
        return sum(p.numel() for p in self.parameters())
