"""The paper's experiments as functions and commands: intrinsic evaluation of pretrained models on MLM, SOP and
NSP (``intrinsic``), and the layer-transition analysis of Figure 2 (``transitions``)."""
