"""`training.precision: auto`: mixed_bfloat16 where the CPU computes bfloat16 in hardware,
float32 elsewhere (and on a GPU, or with oneDNN off or held below bfloat16)."""

import pytest
import yaml

from attncli.config.run import load_run_config
from attncli.config.schema import ConfigError
from attncli.training import precision
from attncli.training.precision import cpu_flags, resolve
from tests.attncli_runs import TINY
from tests.recorder import Recorder

REPOSITORY = TINY.parents[1]
AMX = {"fpu", "avx2", "avx512f", "amx_tile", "amx_bf16"}
AVX512_BF16 = {"avx2", "avx512f", "avx512_bf16"}
AVX2 = {"fpu", "sse4_2", "avx", "avx2", "fma"}


@pytest.mark.parametrize("flags, policy, said", [
    (AMX, "mixed_bfloat16", "this CPU has AMX-BF16"),
    (AVX512_BF16, "mixed_bfloat16", "this CPU has AVX512-BF16"),
    (AMX | AVX512_BF16, "mixed_bfloat16", "this CPU has AMX-BF16 and AVX512-BF16"),
    (AVX2, "float32", "this CPU has no bfloat16 instructions"),
    (set(), "float32", "this CPU has no bfloat16 instructions"),
    (None, "float32", "this CPU has no bfloat16 instructions"),
])
def test_auto_follows_the_cpu_flags(flags, policy, said, monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    assert resolve("auto", environ={}) == (policy, said)


@pytest.mark.parametrize("environ, said", [
    ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "TF_ENABLE_ONEDNN_OPTS turns oneDNN off"),
    ({"TF_ENABLE_ONEDNN_OPTS": "False"}, "TF_ENABLE_ONEDNN_OPTS turns oneDNN off"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "ONEDNN_MAX_CPU_ISA=AVX2 leaves out"),
    ({"ONEDNN_MAX_CPU_ISA": "avx512_core"}, "ONEDNN_MAX_CPU_ISA=AVX512_CORE leaves out"),
])
def test_auto_is_float32_when_onednn_cannot_reach_bfloat16(environ, said):
    policy, reason = resolve("auto", flags=AMX, environ=environ)
    assert policy == "float32" and reason.startswith(said)


@pytest.mark.parametrize("environ", [
    {"TF_ENABLE_ONEDNN_OPTS": "1"}, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"},
    {"ONEDNN_MAX_CPU_ISA": "all"}, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
])
def test_auto_takes_bfloat16_when_onednn_may_use_it(environ):
    assert resolve("auto", flags=AMX, environ=environ)[0] == "mixed_bfloat16"


def test_a_gpu_keeps_float32_for_cudnn():
    policy, reason = resolve("auto", gpus=["GPU:0"], flags=AMX, environ={})
    assert policy == "float32" and "cuDNN" in reason


@pytest.mark.parametrize("name", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_a_policy_given_by_name_is_kept_everywhere(name):
    for flags in (AMX, AVX2):
        assert resolve(name, gpus=["GPU:0"], flags=flags, environ={}) == (name, None)


def test_cpu_flags_reads_the_first_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu avx2 amx_bf16 avx512f\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert cpu_flags(info) == {"fpu", "avx2", "amx_bf16", "avx512f"}
    info.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")  # an ARM CPU
    assert cpu_flags(info) is None
    assert cpu_flags(tmp_path / "missing") is None


def test_the_config_takes_auto_and_names_it_among_the_choices():
    assert load_run_config(overrides=["training.precision=auto"]).training.precision == "auto"
    with pytest.raises(ConfigError, match="auto") as error:
        load_run_config(overrides=["training.precision=bfloat16"])
    assert "\n" not in str(error.value)


def test_the_default_config_trains_in_auto():
    default = yaml.safe_load((REPOSITORY / "configs" / "default.yaml").read_text())
    assert default["training"]["precision"] == "auto"


@pytest.mark.parametrize("flags, policy, compute", [
    (AMX, "mixed_bfloat16", "bfloat16"), (AVX2, "float32", "float32"),
])
def test_a_run_builds_its_model_under_what_auto_became(flags, policy, compute, tmp_path,
                                                       monkeypatch):
    from attncli.cli.train_command import resolve_run
    from attncli.training.builder import build_training

    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    config, run, _ = resolve_run(
        TINY, ["training.precision=auto"], run_dir=tmp_path / "run", data_dir=None,
        resume=False, overwrite=False, init_from=None,
    )
    recorder = Recorder()
    parts = build_training(config, run, recorder)
    assert parts.config.training.precision == policy
    assert parts.model.compute_dtype == compute
    assert all(weight.dtype == "float32" for weight in parts.model.weights)
    [said] = [m for m in recorder.messages if m.startswith("precision auto")]
    assert said.startswith(f"precision auto: {policy} (")
    # The run's own config keeps `auto`: resumed elsewhere, it is asked again.
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())[
        "training"]["precision"] == "auto"
