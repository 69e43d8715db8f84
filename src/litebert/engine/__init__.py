"""The training engine that pretraining and fine-tuning share: where a run executes (`runtime`, which every
inference command resolves too), one optimizer step (`step`), training checkpoints (`checkpoint`), the device and
precision (`device`), the distributed wrapper (`distributed`, the only module that imports ``torch.distributed``),
stop signals (`signals`), the metrics files (`metrics_log`) and the experiment trackers (`trackers`)."""
