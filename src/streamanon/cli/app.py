"""The typer application objects; command modules attach themselves to these."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="streamanon",
    help=(
        "Anonymize data streams before anyone untrusted sees them.\n\n"
        "z-anonymity (`z`), decentralized z-anonymity (deZent), and CASTLE k_s-anonymity with "
        "l-diversity. Every command prints a summary that adds up (read = published + "
        "suppressed + rejected); add --json for one JSON object instead of the table. "
        "Start with `streamanon demo`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

verify_app = typer.Typer(
    help=(
        "Independent checkers: recompute a guarantee from input and output, exit 1 with the "
        "first counterexample."
    ),
    no_args_is_help=True,
)
app.add_typer(verify_app, name="verify")

experiment_app = typer.Typer(
    help=(
        "Parameter grids: run many configurations (in parallel processes), write one CSV row "
        "per run with every parameter, and draw the PNG plots of each trade-off."
    ),
    no_args_is_help=True,
)
app.add_typer(experiment_app, name="experiment")
