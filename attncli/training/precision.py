"""`training.precision: auto`: `mixed_bfloat16` where this machine computes bfloat16 in
hardware, `float32` everywhere else.

bfloat16 products are fast only on a CPU with bfloat16 instructions (AVX512-BF16, or
AMX-BF16) reached through oneDNN, TensorFlow's CPU kernels on x86. Elsewhere TensorFlow
converts to and from float32 around every product and bfloat16 is slower than float32:
on the Xeon of docs/performance.md, a (1920 x 256) @ (256 x 768) product runs at 725
GFLOP/s in bfloat16 against 166 in float32 with AMX, but at 34 against 163 with oneDNN
held to AVX-512 without BF16 (`ONEDNN_MAX_CPU_ISA=AVX512_CORE`), and at 145 against 159
with oneDNN off (`TF_ENABLE_ONEDNN_OPTS=0`). So `auto` asks three things:

- no GPU is training (on a GPU, float32 keeps cuDNN's recurrent kernels; choose
  `mixed_float16` or `mixed_bfloat16` there by name);
- oneDNN is on (`TF_ENABLE_ONEDNN_OPTS` is not `0`/`false`) and not held below the
  bfloat16 instructions by `ONEDNN_MAX_CPU_ISA`;
- the CPU lists `amx_bf16` or `avx512_bf16` among its flags (`/proc/cpuinfo`; on a
  system without it the answer is float32).

`resolve` runs once per process, when the model is built; the run's config keeps
`auto`, and its summary says what `auto` became. The weights are float32 under every
policy, so a run's checkpoints resume under either answer.
"""

import os
from pathlib import Path

BFLOAT16_FLAGS = {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512-BF16"}

# oneDNN's instruction-set levels (`ONEDNN_MAX_CPU_ISA`) that include bfloat16 products.
BFLOAT16_ISAS = {
    "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16",
    "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX10_2_512",
    "AVX10_2_512_AMX_2", "ALL", "DEFAULT",
}


def cpu_flags(path="/proc/cpuinfo"):
    """The flags of the first CPU in `path` as a set, or None where it cannot be read."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return set(value.split())
    return None


def resolve(precision, gpus=(), flags=None, environ=None):
    """The dtype policy `precision` stands for on this machine, and why.

    Args:
        precision: `training.precision`: `"auto"`, or a policy name (returned as it is).
        gpus: the GPUs TensorFlow sees (`tf.config.list_physical_devices("GPU")`).
        flags: the CPU's flags (a set); None reads them with `cpu_flags`.
        environ: the environment; None reads `os.environ`.

    Returns:
        `(policy, reason)`: the policy name, and for `"auto"` a few words saying why
        (None for a policy given by name).
    """
    if precision != "auto":
        return precision, None
    environ = os.environ if environ is None else environ
    if gpus:
        return "float32", "a GPU trains: float32 keeps cuDNN's recurrent kernels"
    if environ.get("TF_ENABLE_ONEDNN_OPTS", "1").strip().lower() in ("0", "false"):
        return "float32", "TF_ENABLE_ONEDNN_OPTS turns oneDNN off: bfloat16 is emulated"
    ceiling = environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if ceiling and ceiling not in BFLOAT16_ISAS:
        return "float32", f"ONEDNN_MAX_CPU_ISA={ceiling} leaves out bfloat16 instructions"
    flags = cpu_flags() if flags is None else flags
    found = [label for flag, label in BFLOAT16_FLAGS.items() if flag in (flags or ())]
    if not found:
        return "float32", "this CPU has no bfloat16 instructions"
    return "mixed_bfloat16", f"this CPU has {' and '.join(found)}"
