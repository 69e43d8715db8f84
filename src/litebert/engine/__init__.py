"""The training engine that pretraining and fine-tuning share: the settings they share and the batch split (`args`),
where a run starts and what it runs with (`plan`), where a run executes (`runtime`, which every inference command
resolves too), one optimizer step (`step`), training checkpoints (`checkpoint`), the device and precision
(`device`), the distributed wrapper (`distributed`, the only module that imports ``torch.distributed``), stop signals
(`signals`), the callbacks both loops report through (`callbacks`), the metrics files (`metrics_log`) and the
experiment trackers (`trackers`)."""
