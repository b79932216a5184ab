"""Configuration: the typed, validated tree that one YAML file gives a whole run.

`yaml_files` reads YAML files and `--set` values with the safe loader's checks and writes
the resolved configuration back; `schema` turns plain YAML mappings into dataclasses and
rejects any unknown key or bad value with the key's full path; `data`, `model`, `training`
and `search` hold one section each, and `run` puts the sections together and reads the
shipped defaults, which `shipped` finds by name. `reference` generates
docs/configuration.md from these classes. Nothing here imports TensorFlow, so a
configuration error is reported before the model is built.
"""
