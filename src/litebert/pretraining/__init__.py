"""Pretraining (MLM + SOP/NSP on a token store): the settings (`config`), the loop (`loop`) and its batch feed
(`feed`), the plateau guard (`plateau`), continued pretraining from a model folder (`init_from`), the command as a
function (`run.pretrain`, also ``litebert.pretrain``), the recipe gate (`gate`) and the flags (`cli`, `gate_cli`)."""
