"""`python -m attncli` and the `attncli` console script."""

from attncli.cli.app import app


def main():
    app(prog_name="attncli")


if __name__ == "__main__":
    main()
