"""How the app meets its user: every mistake one line, every value as it is typed.

`AttncliGroup`, the class of the app's command group, turns an `AttncliError` from any
command, and every command-line parsing error (unknown option, bad integer, ...), into
one line on stderr and exit code 2 (`attncli --debug` shows an `AttncliError`'s
traceback instead), and makes `--help` show what a user types, not Python types.
"""

import typer
from typer.core import TyperArgument, TyperGroup

from attncli.cli.options import DEBUG
from attncli.errors import AttncliError, shown

# Click's UsageError, the base of every parsing error. Typer exports its subclass
# BadParameter but not the class itself, whether Click is vendored (Typer >= 0.25) or not.
_UsageError = typer.BadParameter.__mro__[1]


class AttncliGroup(TyperGroup):
    """The app's command group: reports an `AttncliError` from any command, and any
    command-line parsing error, as `Error: <message>` on stderr and exits with code 2.

    The parsing errors of the app's own options arise in `make_context`, those of a
    command's options and of an unknown or missing command in `invoke`.
    """

    def make_context(self, info_name, args, parent=None, **extra):
        _check_utf8(args)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _UsageError as error:
            _report_usage_error(error)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AttncliError as error:
            if ctx.meta.get(DEBUG):
                raise
            typer.echo(f"Error: {error}", err=True)
            raise typer.Exit(code=2) from None
        except _UsageError as error:
            _report_usage_error(error)

    def get_command(self, ctx, cmd_name):
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _show_what_users_type(command, ctx)
        return command

    def format_help(self, ctx, formatter):
        _show_what_users_type(self, ctx)
        super().format_help(ctx, formatter)


# What --help shows for an option's value when the command does not name it.
_TYPE_METAVARS = {"int": "N", "float": "NUMBER", "Path": "PATH"}


def _show_what_users_type(command, ctx):
    """Make --help show what a user types, not Python types (`<bool>`, `<list[Path]>`).

    A flag shows nothing after its name, an option its `metavar` (else N, NUMBER, PATH
    or TEXT by its type), an argument its `metavar` (else its name in capitals) in the
    usage line, bare when required and in brackets when optional. Typer has no setting
    for this, so the parameters are adjusted before their help is drawn; it applies to
    every command, including any added later.
    """
    for param in command.get_params(ctx):
        if isinstance(param, TyperArgument):
            param.metavar = param.metavar or param.name.upper()
            param.__class__ = _ShownArgument
        elif param.is_flag:
            param.metavar = ""
        elif param.metavar is None:
            element = param.bare_type().removeprefix("list[").removesuffix("]")
            param.metavar = _TYPE_METAVARS.get(element, "TEXT")


class _ShownArgument(TyperArgument):
    """A command-line argument shown by its metavar alone: no type column, no braces."""

    def display_type_rich(self, ctx):
        return None

    def get_usage_pieces(self, ctx):
        name = self.metavar + ("..." if self.nargs != 1 else "")
        return [name if self.required else f"[{name}]"]


def _check_utf8(args):
    """Refuse an argument that is not UTF-8 (Python keeps its bytes as lone surrogates,
    which neither TensorFlow, the terminal nor a UTF-8 file can take)."""
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            typer.echo(f"Error: argument {number}, {shown(arg)}, is not valid UTF-8; attncli "
                       "takes text, file and folder names in UTF-8", err=True)
            raise typer.Exit(code=2) from None
        except AttributeError:  # not a string: given in Python, not on a command line
            continue


# What a word too many most likely meant, by command: `inspect-weights RUN Tengo` is
# `translate RUN Tengo`'s habit, `train CONFIG pairs.tsv` names the data beside the config.
_EXTRA_ARGUMENT_HINTS = {
    "inspect-weights": 'give the text with --text "..."',
    "train": "name the data in the config (data.train) or with --data-dir",
    "serve": "serve more runs with --model NAME=RUN, or decode them together with --ensemble",
}


def _report_usage_error(error):
    message = " ".join(error.format_message().split())
    if not message:
        # `attncli` alone: the help was printed in place of an error.
        raise typer.Exit(code=0) from None
    command = error.ctx.command_path if error.ctx is not None else "attncli"
    if "unexpected extra argument" in message and error.ctx is not None:
        hint = _EXTRA_ARGUMENT_HINTS.get(error.ctx.info_name)
        message += f"; {hint}" if hint else ""
    typer.echo(f"Error: {message} (see '{command} --help')", err=True)
    raise typer.Exit(code=2) from None
