"""``streamanon verify z``: the independent z-anonymity checker on files."""

from __future__ import annotations

import typer

from streamanon.cli.app import verify_app
from streamanon.cli.common import JSON_HELP, TOLERANCE_HELP, fail, print_summary
from streamanon.io import InputError, RejectLog, read_records
from streamanon.zanon.verify import check_z


@verify_app.command("z")
def verify_z(
    source: str = typer.Argument(..., help="The input stream the operator read."),
    output: str = typer.Argument(..., help="The published t,u,a rows to check."),
    z: int = typer.Option(..., "--z", min=1),
    delta_t: float = typer.Option(..., "--delta-t", min=0, help="Δt in seconds."),
    privacy_only: bool = typer.Option(
        False, "--privacy-only",
        help="Only check that every published tuple had >= z distinct users exposing its value "
        "in [t-Δt, t] (for deZent or other publishers); default: the output must be exactly "
        "what the z rule publishes."),
    time_tolerance: float = typer.Option(0.0, "--time-tolerance", min=0, help=TOLERANCE_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Recompute z-anonymity from INPUT alone and check OUTPUT; exit 1 on the first problem.

    Bad input lines are skipped as `streamanon z --on-error skip` would, and counted.
    """
    rejected = RejectLog(source=source)
    try:
        inputs = list(read_records(source, on_error="skip", rejects=rejected,
                                   time_tolerance=time_tolerance))
        outputs = list(read_records(output, monotone=False))
    except (InputError, OSError, ValueError) as exc:
        fail(str(exc))
    report = check_z(inputs, outputs, z, delta_t, exact=not privacy_only)
    summary = report.to_dict()
    summary["input_rejected"] = rejected.count
    print_summary(f"verify z (z={z}, Δt={delta_t:g} s)", summary, as_json)
    if not report.ok:
        if not as_json:
            print(f"counterexample: {report.first_problem}")
        raise typer.Exit(1)
