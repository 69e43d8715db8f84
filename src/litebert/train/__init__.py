"""Pretraining: the loop (``loop.train``), its settings (``config``), checkpoints, metrics, and the distributed
wrapper (the only module that imports ``torch.distributed``). ``litebert pretrain`` is ``cli``."""
