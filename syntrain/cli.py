"""The `syntrain` command line. Training commands arrive with the trainer issue; for now it reports
what it can see (version, device) so installs can be checked."""

from __future__ import annotations

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="syntrain")
def cli() -> None:
    """Transformer trainer over synprep shards (training commands: not yet implemented)."""


@cli.command()
def env() -> None:
    """Print the torch version and the device training would use."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    click.echo(f"syntrain {__version__}, torch {torch.__version__}, device {device}")


def main() -> None:
    """Entry point."""
    cli()
