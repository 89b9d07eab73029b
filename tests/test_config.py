"""Config validation (schema + defaults) and sweep expansion."""

import copy
import re
from pathlib import Path

import pytest
import yaml

import iosweep.config as cfg
from iosweep.config import ConfigError, expand_sweep, load_config, point_by_run_id, validate_config

REPO = Path(__file__).resolve().parents[1]


def test_embedded_default_config_is_valid_and_gets_defaults():
    config = load_config(REPO / "config" / "config.yaml")
    assert config["sweep"]["procs_per_node"] == [1, 2, 4]
    assert config["repeats"] == 1
    # defaults filled in for keys the file leaves out
    assert config["tracer"]["max_records"] == 8192
    assert config["launcher"]["srun_mpi"] == "pmix"
    assert config["training"]["timeout"] == 3600


def test_empty_config_gets_every_default():
    config = validate_config({})
    assert config["sweep"]["frameworks"] == ["pytorch"]
    assert config["results"] == "results"


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"sweeep": {}}, "unknown config key 'sweeep'"),
        ({"sweep": {"ranks": [1]}}, "unknown config key 'sweep.ranks'"),
        ({"sweep": {"frameworks": ["mxnet"]}}, "sweep.frameworks.0"),
        ({"sweep": {"nodes": [0]}}, "sweep.nodes.0"),
        ({"sweep": {"nodes": "2"}}, "sweep.nodes"),
        ({"repeats": 0}, "repeats"),
        ({"launcher": {"kind": "ssh"}}, "launcher.kind"),
        ({"training": {"timeout": "fast"}}, "training.timeout"),
        ({"training": {"epochz": 2}}, "unknown config key 'training.epochz'"),
        (
            {"dataset": {"imagenet": {"classez": 1}}},
            "unknown config key 'dataset.imagenet.classez'",
        ),
    ],
)
def test_bad_keys_are_named(patch, message):
    with pytest.raises(ConfigError) as e:
        validate_config(copy.deepcopy(patch))
    assert message in str(e.value)


@pytest.mark.parametrize(
    "patch",
    [
        {"results": "out; rm -rf ~"},
        {"sweep": {"procs_per_node": ["4; rm -rf ~"]}},
        {"launcher": {"extra_args": ["--mca", "x; rm -rf ~"]}},
        {"launcher": {"hosts": ["node1 && reboot"]}},
        {"tracer": {"darshan_lib": "/opt/lib.so`id`"}},
        {"dataset": {"source": "$(curl evil)"}},
    ],
)
def test_shell_metacharacters_are_rejected(patch):
    with pytest.raises(ConfigError):
        validate_config(copy.deepcopy(patch))


def test_a_path_with_shell_characters_is_refused_with_the_rule():
    # the schema's path definition: no ";" (and no space first)
    with pytest.raises(ConfigError) as e:
        validate_config({"results": "out; rm -rf ~"})
    assert str(e.value) == (
        "invalid config:\n  config key 'results': 'out; rm -rf ~' contains characters that are "
        "not allowed (must match ^[A-Za-z0-9_./~+@%:,=-][A-Za-z0-9_./~+@%:,= -]*$)"
    )


def test_a_config_that_is_not_a_mapping_is_named(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("- frameworks\n- pytorch\n")
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    assert str(e.value) == f"{bad}: the config must be a mapping of keys to values"


def test_each_config_gets_its_own_copy_of_a_default():
    # a default changed in one validated config must not change the next one's, down to the
    # mappings inside a default list (the file classes: the first is "other")
    a = validate_config({})
    a["sweep"]["frameworks"].append("tensorflow")
    a["analysis"]["file_classes"][0]["name"] = "changed"
    b = validate_config({})
    assert b["sweep"]["frameworks"] == ["pytorch"]
    assert b["analysis"]["file_classes"][0]["name"] == "other"


def test_unknown_analysis_key_is_named():
    with pytest.raises(ConfigError) as e:
        validate_config({"analysis": {"no_such_setting": 1}})
    assert "no_such_setting" in str(e.value)


def test_yaml_errors_name_the_file(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("sweep: [unclosed\n")
    with pytest.raises(ConfigError, match=str(bad)):
        load_config(bad)


def test_sweep_expansion_paths_and_order():
    config = validate_config(
        {
            "sweep": {
                "frameworks": ["pytorch", "tensorflow"],
                "nodes": [1, 2],
                "procs_per_node": [1, 4],
            },
            "repeats": 2,
        }
    )
    points = expand_sweep(config)
    assert len(points) == 2 * 2 * 2 * 2
    assert points[0].run_id == "framework~pytorch/nodes~1/ppn~1/rep~0"
    assert points[1].run_id == "framework~pytorch/nodes~1/ppn~1/rep~1"
    assert len({p.run_id for p in points}) == len(points)
    p = point_by_run_id(config, "framework~tensorflow/nodes~2/ppn~4/rep~1")
    assert (p.framework, p.nodes, p.ppn, p.ranks, p.rep) == ("tensorflow", 2, 4, 8, 1)
    assert p.params()["ranks"] == 8


def test_swept_training_parameters_appear_in_the_path():
    config = validate_config(
        {"sweep": {"procs_per_node": [2], "batch_size": [32, 64], "tracers": ["none", "auto"]}}
    )
    ids = [p.run_id for p in expand_sweep(config)]
    assert "framework~pytorch/tracer~none/nodes~1/ppn~2/batch~32/rep~0" in ids
    assert len(ids) == 4


def test_unknown_run_id_is_an_error():
    config = validate_config({})
    with pytest.raises(ConfigError, match="not a point"):
        point_by_run_id(config, "framework~pytorch/nodes~9/ppn~9/rep~0")


def test_schema_documents_every_key_in_config_readme():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    readme = (REPO / "config" / "README.md").read_text()

    def keys(node, prefix=""):
        for name, sub in node.get("properties", {}).items():
            yield prefix + name
            yield from keys(sub, prefix + name + ".")

    missing = [k for k in keys(schema) if f"`{k}`" not in readme]
    assert not missing, f"config/README.md does not document: {missing}"


def test_every_analysis_setting_is_documented_in_config_readme():
    import dataclasses

    from iosweep.analysis import AnalysisSettings

    readme = (REPO / "config" / "README.md").read_text()
    missing = [
        f.name for f in dataclasses.fields(AnalysisSettings) if f"`analysis.{f.name}`" not in readme
    ]
    assert not missing, f"config/README.md does not document analysis settings: {missing}"


def test_config_readme_key_tables_are_generated_from_the_schema():
    from iosweep.config import render_docs

    readme = (REPO / "config" / "README.md").read_text()
    blocks = re.findall(r"<!-- keys: ([a-z_ ]+) -->", readme)
    documented = [k for b in blocks for k in b.split()]
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert sorted(documented) == sorted(schema["properties"])  # each section once
    assert render_docs(readme) == readme, "run: python -m iosweep.config --write-docs"


def test_settings_classes_are_the_schema_sections():
    import dataclasses

    from iosweep.analysis import AnalysisSettings
    from iosweep.config import section_defaults
    from iosweep.report import ReportSettings

    for cls, section in ((AnalysisSettings, "analysis"), (ReportSettings, "report")):
        assert [f.name for f in dataclasses.fields(cls)] == list(section_defaults(section))
        assert cls().to_dict() == section_defaults(section)


def test_a_bad_analysis_regex_in_the_workflow_config_is_named():
    with pytest.raises(ConfigError, match=r"analysis\.exclude_pattern.*regex"):
        validate_config({"analysis": {"exclude_pattern": "(["}})


def test_include_blocks_add_points_completed_from_the_main_block():
    # the embedded default (config/config.yaml): MNIST, 2 frameworks x ppn 1, 2, 4; then its
    # include block, ImageNet-style at ppn 2 with 0, 2, 4 loader workers, both frameworks
    # taken from the main block: 6 + 6 points, in this order
    ids = [p.run_id for p in expand_sweep(load_config(REPO / "config/config.yaml"))]
    # TensorFlow's MNIST takes no loader workers: unset, so its run ids do not name any
    mnist = "workload~mnist/nodes~1/ppn~{}/steps~60/batch~64/workers~0/rep~0"
    tf_mnist = "workload~mnist/nodes~1/ppn~{}/steps~60/batch~64/rep~0"
    imagenet = "workload~imagenet/nodes~1/ppn~2/steps~0/batch~32/workers~{}/rep~0"
    assert ids == [
        *("framework~pytorch/" + mnist.format(n) for n in (1, 2, 4)),
        *("framework~tensorflow/" + tf_mnist.format(n) for n in (1, 2, 4)),
        *(f"framework~{f}/" + imagenet.format(w) for f in ("pytorch", "tensorflow") for w in (0, 2, 4)),
    ]  # fmt: skip
    # a block repeating points of another adds none
    config = validate_config(
        {"sweep": {"procs_per_node": [1, 2], "include": [{"procs_per_node": [2]}]}}
    )
    assert [p.run_id for p in expand_sweep(config)] == [
        "framework~pytorch/nodes~1/ppn~1/rep~0",
        "framework~pytorch/nodes~1/ppn~2/rep~0",
    ]


def test_the_whole_error_message_names_each_bad_key_once():
    with pytest.raises(ConfigError) as e:
        validate_config({"sweeep": {}, "repeats": "two", "sweep": {"nodes": [1], "rankz": [2]}})
    assert str(e.value) == (
        "invalid config:\n"
        "  unknown config key 'sweeep'; allowed here: analysis, dataset, ingest, launcher, "
        "repeats, report, results, staging, sweep, tracer, training, tune, workloads\n"
        "  config key 'repeats': 'two' is not of type integer\n"
        "  unknown config key 'sweep.rankz'; allowed here: batch_size, epochs, frameworks, "
        "include, loader_workers, nodes, procs_per_node, staging, steps_per_epoch, tracers, "
        "workloads"
    )
    with pytest.raises(ConfigError) as e:
        validate_config([1, 2])  # type: ignore[arg-type]
    assert (
        str(e.value) == "invalid config:\n  config key '<top level>': [1, 2] is not of type object"
    )


def test_doc_text_of_values_and_ranges():
    assert (
        cfg._flow({"a": [1, "^/proc"], "b": None, "c": True})
        == "{a: [1, ^/proc], b: null, c: true}"
    )
    assert [cfg._range(s) for s in ({"minimum": 1}, {"maximum": 5}, {"minimum": 0, "maximum": 1}, {"exclusiveMinimum": 0}, {})] == [" ≥ 1", " ≤ 5", " in [0, 1]", " > 0", ""]  # fmt: skip
    rows = cfg._rows("x", {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}, "b": {"type": "string", "default": "s"}}})  # fmt: skip
    assert rows == [
        "| `x` | `{a}` | (optional) |  |",
        "| `x.a` | integer | (required) |  |",
        "| `x.b` | string | `s` |  |",
    ]


def test_write_docs_regenerates_a_stale_readme(tmp_path, capsys):
    readme = tmp_path / "README.md"
    text = (REPO / "config/README.md").read_text()
    stale = re.sub(r"(<!-- keys: [a-z_ ]+ -->\n).*?(<!-- /keys -->)", r"\1| old |\n\2", text, flags=re.S)  # fmt: skip
    assert stale != text
    readme.write_text(stale)
    assert cfg.main(["--write-docs", str(readme)]) == 0
    assert readme.read_text() == text
    assert "key tables regenerated" in capsys.readouterr().out


def test_write_docs_defaults_to_config_readme_and_says_what_it_does(tmp_path, monkeypatch, capsys):
    # run from a checkout's root: config/README.md is the file it regenerates
    (tmp_path / "config").mkdir()
    readme = tmp_path / "config" / "README.md"
    readme.write_text((REPO / "config/README.md").read_text())
    monkeypatch.chdir(tmp_path)
    assert cfg.main(["--write-docs"]) == 0
    assert capsys.readouterr().out == (
        "config/README.md: key tables regenerated from config.schema.yaml\n"
    )
    with pytest.raises(SystemExit):
        cfg.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m iosweep.config [-h] --write-docs [readme]")
    assert "python -m iosweep.config --write-docs [README]``: regenerate the key tables" in out


def test_enum_any_of_and_setting_messages_are_whole():
    with pytest.raises(ConfigError) as e:
        validate_config({"sweep": {"frameworks": ["mxnet"]}})
    assert str(e.value) == (
        "invalid config:\n  config key 'sweep.frameworks.0': 'mxnet' is not one of "
        "['pytorch', 'tensorflow']"
    )
    # anyOf (a choice or a path): the key's own description says what is allowed
    with pytest.raises(ConfigError) as e:
        validate_config({"dataset": {"source": 5}})
    assert str(e.value).startswith(
        "invalid config:\n  config key 'dataset.source': 5 is not allowed (`synthetic`: a "
        "deterministic, learnable MNIST-shaped dataset"
    )
    with pytest.raises(cfg.SettingTypeError) as e:
        cfg.check_section("analysis", {"file_classes": [{"name": "x", "pattern": 3}]})
    assert str(e.value) == "analysis setting 'file_classes[0].pattern': 3 is not of type 'string'"


def test_unknown_nested_setting_names_its_path_and_the_known_keys():
    with pytest.raises(cfg.UnknownSettingError) as e:
        cfg.check_section("analysis", {"file_classes": [{"name": "x", "pattern": "a", "bogus": 1}]})
    assert str(e.value) == "unknown analysis setting 'file_classes[0].bogus'; known: name, pattern"
