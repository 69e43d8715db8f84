"""`litebert.values`: one strict parser per kind of comma list, and every list flag reading through them (issue 57,
item 7: ``--lr=1e-4,`` ran one rate silently; the experiments' lists dropped empty items, ``--labels a,`` made a
label ''). Properties against Python's own ``float``/``int`` of the items, then each flag by hand."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from litebert.cli import main
from litebert.errors import ConfigError
from litebert.values import integers, integers_or_all, items, names, numbers

floats = st.floats(allow_nan=False, allow_infinity=False)
spaces = st.sampled_from(("", " ", "  "))


@st.composite
def comma_list(draw, item):
    """(text, items, has an empty item): items joined by commas, spaces around some, maybe an empty item put in."""
    values = draw(st.lists(item, min_size=1, max_size=5))
    parts = [draw(spaces) + v + draw(spaces) for v in values]
    empty = draw(st.booleans())
    if empty:
        parts.insert(draw(st.integers(0, len(parts))), draw(spaces))  # "a,", ",a", "a,,b", "a, ,b"
    return ",".join(parts), values, empty


@given(case=comma_list(floats.map(repr)))
def test_numbers_are_floats_of_the_items_and_an_empty_item_is_refused(case):
    text, values, empty = case
    if empty:
        with pytest.raises(ConfigError, match=r"^lr = .*: an empty item \(a comma too many\?\)"):
            numbers(text, "lr")
    else:
        assert numbers(text, "lr") == [float(v) for v in values]


@given(case=comma_list(st.integers(-10**6, 10**6).map(str)))
def test_integers_are_ints_of_the_items(case):
    text, values, empty = case
    if empty:
        with pytest.raises(ConfigError, match="an empty item"):
            integers(text, "sizes")
    else:
        assert integers(text, "sizes") == [int(v) for v in values]


@given(case=comma_list(st.one_of(st.integers(-10**6, 10**6).map(str), st.just("all"))))
def test_integers_or_all_read_all_as_none(case):
    text, values, empty = case
    if empty:
        with pytest.raises(ConfigError, match="an empty item"):
            integers_or_all(text, "sizes")
    else:
        assert integers_or_all(text, "sizes") == [None if v == "all" else int(v) for v in values]


@given(case=comma_list(st.text(st.characters(exclude_characters=","), min_size=1).filter(str.strip)))
def test_names_are_the_stripped_items_each_once(case):
    text, values, empty = case
    stripped = [v.strip() for v in values]
    if empty:
        with pytest.raises(ConfigError, match="an empty item"):
            names(text, "labels")
    elif len(set(stripped)) < len(stripped):
        with pytest.raises(ConfigError, match="is there twice; give each name once"):
            names(text, "labels")
    else:
        assert names(text, "labels") == stripped


@given(text=st.text(max_size=12))
def test_any_text_is_a_list_or_a_one_line_config_error(text):
    try:
        numbers(text, "lr")
    except ConfigError as e:
        assert "\n" not in str(e) and str(e).startswith("lr = ")


def test_by_hand():
    assert numbers("1e-4, 3e-4", "lr") == [1e-4, 3e-4] and integers("128,256", "e") == [128, 256]
    assert items(" a ,b", "x") == ["a", "b"]
    for bad, message in (("", "empty; give one or more"), ("1e-4,", "an empty item"), ("1e-4,x", "'x' is not a "
                         "number"), ("inf", "'inf' is not a number"), ("nan", "'nan' is not a number")):
        with pytest.raises(ConfigError, match=message):
            numbers(bad, "lr")
    with pytest.raises(ConfigError, match="'1.5' is not a whole number"):
        integers("1,1.5", "e")
    for bad in ("250,All", "250,1e3", "al"):
        with pytest.raises(ConfigError, match="neither a whole number nor 'all'"):
            integers_or_all(bad, "sizes")


@pytest.mark.parametrize("argv, flag", [
    (["finetune", "sst2", "--model", "m", "--data", "d", "--out", "o", "--labels", "neg,pos,"], "--labels"),
    (["finetune", "sst2", "--model", "m", "--data", "d", "--out", "o", "--lr", "1e-4,,3e-4"], "--lr"),
    (["experiment", "sharing", "--out", "o", "--embedding-sizes", "128,"], "--embedding-sizes"),
    (["experiment", "sentence-objective", "--out", "o", "--control-lrs", ",1e-4"], "--control-lrs"),
    (["experiment", "speedup", "--out", "o", "--processes", "1,2,"], "--processes"),
    (["analyze", "transitions", "a", "b", "--data", "s", "--out", "o.png", "--names", "x,"], "--names"),
])
def test_every_list_flag_refuses_an_empty_item(argv, flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:  # argparse's usage error, before anything runs
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and f"argument {flag}: invalid value" in err and "an empty item" in err, err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------- the lists read elsewhere
# (field, owner as the error names it, a parse of the text, the names it takes): every list field reads through
# `litebert.values.names`, so an empty item or a name twice is refused in one line naming the field.
def _report_to(text):
    from litebert import TrainConfig

    return TrainConfig(report_to=text).report_to


def _lora_targets(text):
    from litebert.finetuning.config import FinetuneConfig

    return FinetuneConfig(lora=True, lora_targets=text).lora_args()["targets"]


def _objectives(text):
    from litebert.experiments.intrinsic import parse_objectives

    return list(parse_objectives(text))


LIST_FIELDS = [
    ("TrainConfig.report_to", _report_to, ("tensorboard", "wandb", "mlflow"), lambda t, v: t),
    ("FinetuneConfig.lora_targets", _lora_targets, ("query", "key", "value", "dense"), lambda t, v: v),
    ("objectives", _objectives, ("mlm", "sop", "nsp"), lambda t, v: v),
]


@pytest.mark.parametrize("field, parse, known, expected", LIST_FIELDS, ids=[f[0] for f in LIST_FIELDS])
@given(data=st.data())
def test_list_fields_refuse_an_empty_item_naming_the_field(field, parse, known, expected, data):
    text, values, empty = data.draw(comma_list(st.sampled_from(known)))
    stripped = [v.strip() for v in values]
    if empty or len(set(stripped)) < len(stripped):
        with pytest.raises(ConfigError) as e:
            parse(text)
        message = str(e.value)
        assert "\n" not in message and message.startswith(f"{field} = {text!r}: "), message
        assert ("an empty item" if empty else "twice") in message
    else:
        assert parse(text) == expected(text, stripped)


@pytest.mark.parametrize("argv, flag", [
    (["pretrain", "--preset", "tiny", "--data", "s", "--out", "o", "--report-to", "tensorboard,"], "--report-to"),
    (["finetune", "sst2", "--model", "m", "--data", "d", "--out", "o", "--lora", "--lora-targets", "query,"],
     "--lora-targets"),
    (["evaluate-pretraining", "m", "--data", "s", "--objectives", "mlm,,sop"], "--objectives"),
])
def test_list_fields_refuse_an_empty_item_as_their_flag(argv, flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("litebert ") and f"{flag} " in err[0] and "an empty item" in err[0], err
    assert not (tmp_path / "o").exists()
