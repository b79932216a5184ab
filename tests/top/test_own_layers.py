"""A `layers` module of the user's own, found before attncli's package, is one line."""

from attncli_process import attncli
from cli_errors import one_line_error


def test_a_users_layers_module_in_the_working_folder_is_named_in_one_line(tmp_path):
    (tmp_path / "layers.py").write_text("Dense = None  # a Keras project's own layers\n")
    message = one_line_error(attncli("score-demo", cwd=tmp_path, check=False))
    assert str(tmp_path / "layers.py") in message
    assert "shadows attncli's own package 'layers'" in message


def test_a_layers_folder_of_the_users_own_is_named_too(tmp_path):
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "__init__.py").write_text("")
    message = one_line_error(attncli("score-demo", cwd=tmp_path, check=False))
    assert str(tmp_path / "layers") in message


def test_attncli_runs_where_no_module_shadows_its_layers(tmp_path):
    result = attncli("score-demo", cwd=tmp_path)
    assert "context" in result.stdout
