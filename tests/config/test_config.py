import dataclasses
import types
import typing
from typing import Literal

import pytest
import yaml

from attncli.config.data import DataConfig, SideConfig
from attncli.config.model import ModelConfig, ModelSettings
from attncli.config.run import run_config_from_mapping
from attncli.config.schema import ConfigError, from_mapping, to_mapping
from attncli.config.yaml_files import apply_overrides, load_yaml, save_yaml
from attncli.config.training import LoopConfig
from attncli.data.sources import data_paths
from attncli.errors import DataError


@dataclasses.dataclass
class Attention:
    score: Literal["dot", "general"] = "dot"
    window: int = 10


@dataclasses.dataclass
class Model:
    units: int = 256
    dropout: float = 0.0
    attention: Attention = dataclasses.field(default_factory=Attention)
    layers: list[int] = dataclasses.field(default_factory=lambda: [1])
    name: str | None = None

    def __post_init__(self):
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1). Received: dropout={self.dropout}")


@dataclasses.dataclass
class Run:
    model: Model = dataclasses.field(default_factory=Model)
    bidirectional: bool = True


def test_defaults_from_empty_mapping():
    assert from_mapping(Run, None) == Run()


def test_nested_values_are_typed():
    run = from_mapping(
        Run, {"model": {"units": 64, "dropout": 0, "attention": {"score": "general"}}}
    )
    assert run.model.units == 64
    assert run.model.dropout == 0.0 and isinstance(run.model.dropout, float)
    assert run.model.attention.score == "general"


@pytest.mark.parametrize(
    "mapping, message",
    [
        (
            {"model": {"unit": 3}},
            "model.unit: unknown key; did you mean model.units? allowed keys here: units,",
        ),
        ({"model": {"size": 3}}, "model.size: unknown key; allowed keys here: units,"),
        (
            {"model": {"units": "many"}},
            "model.units must be an integer. Received: model.units='many'",
        ),
        ({"model": {"units": True}}, "model.units must be an integer. Received: model.units=True"),
        (
            {"model": {"attention": {"score": "cosine"}}},
            "model.attention.score must be one of dot, general. "
            "Received: model.attention.score='cosine'",
        ),
        (
            {"model": {"layers": [1, "x"]}},
            "model.layers[1] must be an integer. Received: model.layers[1]='x'",
        ),
        ({"model": {"dropout": 1.5}}, "model: dropout must be in [0, 1). Received: dropout=1.5"),
        (
            {"bidirectional": "yes"},
            "bidirectional must be true or false. Received: bidirectional='yes'",
        ),
        ({"model": [1, 2]}, "model must be a mapping of keys to values. Received: model=[1, 2]"),
    ],
)
def test_bad_values_name_the_full_key_path(mapping, message):
    with pytest.raises(ConfigError) as error:
        from_mapping(Run, mapping)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_overrides_parse_yaml_scalars_and_create_sections():
    mapping = apply_overrides(
        {"model": {"units": 8}},
        ["model.attention.score=general", "model.units=32", "bidirectional=false"],
    )
    run = from_mapping(Run, mapping)
    assert run.model.attention.score == "general"
    assert run.model.units == 32
    assert run.bidirectional is False


def test_an_override_of_an_aliased_section_changes_that_section_only(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data:\n  source: &side {lowercase: false, level: word}\n  target: *side\n")
    mapping = apply_overrides(load_yaml(path), ["data.target.lowercase=true"])
    assert mapping["data"]["target"] == {"lowercase": True, "level": "word"}
    assert mapping["data"]["source"] == {"lowercase": False, "level": "word"}


@pytest.mark.parametrize("override", ["novalue", "=3", "model..units=3"])
def test_malformed_override(override):
    with pytest.raises(ConfigError, match="expected KEY.PATH=VALUE"):
        apply_overrides({}, [override])


def test_override_through_a_value_is_rejected():
    with pytest.raises(ConfigError, match="model.units is a value, not a section"):
        apply_overrides({"model": {"units": 3}}, ["model.units.x=1"])


def test_yaml_round_trip(tmp_path):
    run = from_mapping(Run, {"model": {"units": 7, "name": "tiny"}})
    path = tmp_path / "config.yaml"
    save_yaml(run, path)
    assert from_mapping(Run, load_yaml(path)) == run
    assert yaml.safe_load(path.read_text())["model"]["layers"] == [1]
    assert to_mapping(run)["model"]["attention"] == {"score": "dot", "window": 10}


def test_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  units: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: .* at line \d+, column \d+"):
        load_yaml(path)


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_yaml(tmp_path / "absent.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping of sections"):
        load_yaml(path)


def test_a_misspelt_override_names_the_closest_key():
    mapping = apply_overrides({}, ["training.max_minute=30"])
    with pytest.raises(ConfigError, match=r"^training.max_minute: unknown key; did you mean "
                       r"training.max_minutes\? allowed keys here: learning_rate, "):
        run_config_from_mapping(mapping)


@pytest.mark.parametrize("text", ["Vamos.\tLet's go.\n¡Hola!\tHello!\n",
                                  "# pairs\nVamos.\tLet's go.\n\nmodel: x\ty\n",
                                  "Let's go.\nHello!\n"])
def test_a_data_file_given_as_the_config_is_named_as_such(tmp_path, text):
    path = tmp_path / "pairs.tsv"
    path.write_text(text, "utf-8")
    with pytest.raises(ConfigError) as error:
        load_yaml(path)
    assert str(error.value) == (
        f"{path} looks like a data file, not a config: give a config (attncli configs lists "
        "the shipped ones) and the data with data.train / --data-dir"
    )


def test_a_config_indented_with_a_tab_is_a_yaml_error(tmp_path):
    path = tmp_path / "tabbed.yaml"
    path.write_text("model:\n\tunits: 3\n")
    with pytest.raises(ConfigError, match=r"tabbed.yaml: found character '\\t' that cannot "
                       r"start any token at line 2, column 1; fix the YAML syntax"):
        load_yaml(path)


def test_a_key_given_twice_names_the_key_and_line(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("model:\n  units: 7\n  dropout: 0.1\n  units: 9\n")
    with pytest.raises(ConfigError, match=r"twice.yaml: the key 'units' is given twice at line 4"):
        load_yaml(path)


def test_aliases_are_not_duplicates(tmp_path):
    path = tmp_path / "alias.yaml"
    path.write_text("a: &side {units: 3}\nb: *side\n")
    assert load_yaml(path) == {"a": {"units": 3}, "b": {"units": 3}}


@pytest.mark.parametrize("text, value", [("1e-3", 0.001), ("2E4", 20000.0), ("-1.5e-2", -0.015),
                                         ("0.001", 0.001), ("1", 1)])
def test_exponent_floats_are_floats_in_files_and_overrides(tmp_path, text, value):
    path = tmp_path / "lr.yaml"
    path.write_text(f"training:\n  learning_rate: {text}\n")
    assert load_yaml(path)["training"]["learning_rate"] == value
    assert type(load_yaml(path)["training"]["learning_rate"]) is type(value)
    assert apply_overrides({}, [f"training.learning_rate={text}"]) == {
        "training": {"learning_rate": value}
    }
    assert yaml.safe_load("x: 1e-3")["x"] == "1e-3"  # the safe loader itself is unchanged


def test_merge_keys_still_work_and_may_be_overridden(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &base {units: 3, cell: gru}\nmodel:\n  <<: *base\n  units: 5\n")
    assert load_yaml(path)["model"] == {"units": 5, "cell": "gru"}


def test_a_key_that_is_a_list_is_a_one_line_error(tmp_path):
    path = tmp_path / "complex.yaml"
    path.write_text("? [a, b]\n: 1\n")
    with pytest.raises(ConfigError, match="complex.yaml: found unhashable key at line 1"):
        load_yaml(path)


def test_allowed_values_are_read_from_the_literal_type():
    @dataclasses.dataclass(frozen=True)
    class WithRnn(ModelConfig):
        cell: Literal["gru", "lstm", "rnn"] = "gru"

    sizes = dict(source_vocab_size=20, target_vocab_size=20)
    assert WithRnn(**sizes, cell="rnn").cell == "rnn"
    with pytest.raises(ValueError, match=r"cell must be one of gru, lstm, rnn\. "
                                         r"Received: cell='elman'"):
        WithRnn(**sizes, cell="elman")
    with pytest.raises(ConfigError, match=r"model\.cell must be one of gru, lstm, rnn\. "
                                          r"Received: model\.cell='elman'"):
        from_mapping(WithRnn, {"source_vocab_size": 20, "target_vocab_size": 20,
                               "cell": "elman"}, "model")


def literal_fields():
    """`(dataclass, field name, allowed values)` of every `Literal` field of the sections."""
    for cls in (DataConfig, SideConfig, ModelConfig, LoopConfig):
        for name, annotation in typing.get_type_hints(cls).items():
            options = typing.get_args(annotation) if typing.get_origin(annotation) in (
                typing.Union, types.UnionType) else (annotation,)
            literals = [o for o in options if typing.get_origin(o) is Literal]
            if literals:
                yield pytest.param(cls, name, typing.get_args(literals[0]),
                                   id=f"{cls.__name__}.{name}")


@pytest.mark.parametrize("cls, name, allowed", list(literal_fields()))
def test_every_literal_field_is_checked_when_built_in_code(cls, name, allowed):
    required = {"source_vocab_size": 20, "target_vocab_size": 20} if cls is ModelConfig else {}
    message = rf"{name} must be one of {', '.join(allowed)}( or null)?\. Received: {name}='bogus'"
    with pytest.raises(ValueError, match=message):
        cls(**required, **{name: "bogus"})


def test_the_model_section_is_typed_and_sized_by_the_vocabularies():
    config = run_config_from_mapping({"model": {"units": 32, "embedding_dim": 32}})
    assert config.model == ModelSettings(units=32, embedding_dim=32)
    assert "source_vocab_size" not in to_mapping(config)["model"]
    sized = config.model.sized(10, 12)
    assert isinstance(sized, ModelConfig) and sized.units == 32
    assert (sized.source_vocab_size, sized.target_vocab_size) == (10, 12)
    with pytest.raises(ValueError, match="source_vocab_size=3"):
        config.model.sized(3, 12)
    with pytest.raises(ConfigError, match="model: heads must divide embedding_dim"):
        run_config_from_mapping({"model": {"encoder": "self-attention", "heads": 5}})


def guided(alignments="links.txt", **settings):
    """A run mapping with guided alignment training on a tsv file."""
    mapping = {"data": {"format": "tsv", "train": "pairs.tsv", "alignments": alignments},
               "training": {"guided_alignment": {"weight": 0.5}}}
    for path, value in settings.items():
        section, key = path.split("__")
        if section == "guided":
            mapping["training"]["guided_alignment"][key] = value
        else:
            mapping.setdefault(section, {})[key] = value
    return mapping


def test_guided_alignment_resolves_garg_et_al_s_default_head():
    config = run_config_from_mapping(guided())
    assert config.training.guided_alignment.weight == 0.5
    assert config.training.guided_alignment.supervised(config.model) == (1, 1)
    transformer = run_config_from_mapping(guided(
        model__decoder="self-attention", model__decoder_layers=6, model__heads=8))
    assert transformer.training.guided_alignment.supervised(transformer.model) == (5, 1)
    chosen = run_config_from_mapping(guided(
        model__decoder="self-attention", model__decoder_layers=2, model__heads=4,
        guided__layer=2, guided__head=4))
    assert chosen.training.guided_alignment.supervised(chosen.model) == (2, 4)


@pytest.mark.parametrize(("mapping", "message"), [
    (guided(guided__weight=0), "training.guided_alignment: weight must be positive"),
    (guided(guided__head=0), "training.guided_alignment: head counts from 1"),
    ({"training": {"guided_alignment": {"layer": 1}}},
     "training.guided_alignment.weight: required key is missing"),
    (guided(guided__layer=2), "training.guided_alignment.layer: the luong decoder has one "
                              "attention: leave layer null. Received: layer=2"),
    (guided(model__decoder="self-attention", model__decoder_layers=2, guided__layer=3),
     "training.guided_alignment.layer: the decoder has 2 blocks. Received: layer=3"),
    (guided(model__decoder="self-attention", guided__head=5),
     "training.guided_alignment.head: the cross-attention has 4 heads. Received: head=5"),
    (guided(model__decoder="self-attention", model__attention_dropout=0.1),
     "guided_alignment supervises the attention weights, which model.attention_dropout"),
    (guided(alignments=None), "training.guided_alignment trains on the word alignments of "
                              "data.alignments: give both or neither"),
    ({"data": {"format": "tsv", "train": "pairs.tsv", "alignments": "links.txt"}},
     "give both or neither"),
    (guided(data__format="pronunciations"),
     "data: alignments are read beside a parallel or tsv training file"),
    (guided(training__distribute="mirrored"),
     "training: guided_alignment trains on one device: set distribute: none"),
    (guided(training__precision="mixed_float16"),
     "training: guided_alignment's gradient overflows float16 where the attention is small"),
])
def test_guided_alignment_refusals_name_the_key(mapping, message):
    with pytest.raises(ConfigError) as error:
        run_config_from_mapping(mapping)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_missing_alignments_file_is_named(tmp_path):
    (tmp_path / "pairs.tsv").write_text("a\tb\n")
    config = run_config_from_mapping(guided())
    with pytest.raises(DataError, match=r"^data\.alignments: no such file .*links\.txt; check "
                                        "the path or pass --data-dir$"):
        data_paths(config.data, tmp_path)
    (tmp_path / "links.txt").write_text("0-0\n")
    assert data_paths(config.data, tmp_path)["alignments"] == tmp_path / "links.txt"
