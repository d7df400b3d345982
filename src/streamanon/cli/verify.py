"""``streamanon verify z`` and ``verify castle``: the independent checkers on files and topics.

Both read their files with the checker's own reader (nothing of :mod:`streamanon.io` runs, nor
anything of the operator they check: a test traces every call). Exit codes: 0 every check
holds, 1 a check found a problem (the first counterexample goes to stderr), 2 usage or input
error (nothing was checked).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from streamanon.cli.app import verify_app
from streamanon.cli.common import JSON_HELP, TOLERANCE_HELP, fail, print_summary
from streamanon.cli.exitcodes import skip_teardown
from streamanon.errors import ConfigError, InputError

EXIT_CODES = ("Exit codes: 0 = every check holds; 1 = a check found a problem (the first "
              "counterexample is printed on stderr); 2 = usage or input error (nothing was "
              "checked).")


DELIMITER_HELP = ("The field delimiter of a CSV INPUT: one character, or tab (also '\\t'), "
                  "comma, semicolon, pipe (the run's --delimiter). Outputs are comma CSV.")


def _help(text: str) -> str:
    """Help text for rich: each paragraph on one line (the terminal wraps it), examples kept."""
    paragraphs = []
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        keep = block.startswith("    ")
        paragraphs.append("\n".join(lines) if keep else " ".join(x.strip() for x in lines))
    return "\n\n".join(paragraphs)


def _finish(title: str, summary: dict, ok: bool, problem: str | None, as_json: bool) -> None:
    print_summary(title, summary, as_json)
    skip_teardown()  # the verdict is printed: no need to free the tables object by object
    if not ok:
        print(f"counterexample: {problem}", file=sys.stderr)
        raise typer.Exit(1)


@verify_app.command("z", help=_help(f"""Recompute z-anonymity from INPUT alone and check OUTPUT.

By default OUTPUT must be exactly what the z rule publishes on INPUT (same tuples, same order,
each at its most specific level seen by >= z users within Δt). With --privacy-only every
published tuple must stand for its own input tuple and its value must have been exposed by
>= z distinct users at times in \\[t-Δt, t] (for deZent and other publishers).

Both files are read by the checker's own reader (a kafka://HOST:PORT/TOPIC is read to its
end, one message a line, partitions merged by timestamp): CSV (header naming t,u,a, or three columns
without one) or JSON Lines; surrounding spaces of u and a are not part of them. Bad input
lines are skipped and counted, as `streamanon z --on-error skip` does; an input time up to
--time-tolerance seconds behind the latest one counts at that latest time (re-stamped, as
the operator does), a later one is skipped. A bad OUTPUT line is an input error.

{EXIT_CODES}

Examples:

    streamanon verify z --z 5 --delta-t 3600 trace.csv published.csv

    streamanon verify z --z 10 --delta-t 7260 --privacy-only in.csv out.csv --json
"""))
def verify_z(
    source: str = typer.Argument(..., metavar="INPUT", help="The input stream the operator "
                                 "read (- = stdin, or kafka://HOST:PORT/TOPIC)."),
    output: str = typer.Argument(..., metavar="OUTPUT", help="The published t,u,a rows (a "
                                 "file or kafka://HOST:PORT/TOPIC)."),
    z: int = typer.Option(..., "--z", min=1, help="The z the operator ran with."),
    delta_t: float = typer.Option(..., "--delta-t", min=0, help="The window Δt in seconds."),
    privacy_only: bool = typer.Option(
        False, "--privacy-only",
        help="Only check the guarantee (>= z distinct users exposed each published value in "
        "\\[t-Δt, t]); default: the output must be exactly what the z rule publishes."),
    time_tolerance: float = typer.Option(0.0, "--time-tolerance", min=0, help=TOLERANCE_HELP),
    in_format: str = typer.Option(None, "--input-format", help="csv or jsonl (default: by "
                                  "INPUT's extension)."),
    out_format: str = typer.Option(None, "--output-format", help="csv or jsonl (default: by "
                                   "OUTPUT's extension)."),
    delimiter: str = typer.Option(",", "--delimiter", help=DELIMITER_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    from streamanon.verify._read import field_delimiter
    from streamanon.verify.z import check_z_files

    try:
        report = check_z_files(source, output, z, delta_t, exact=not privacy_only,
                               time_tolerance=time_tolerance, in_format=in_format,
                               out_format=out_format, in_delimiter=field_delimiter(delimiter))
    except (InputError, ConfigError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename}: {exc.strerror}")
    mode = "privacy only" if privacy_only else "exact"
    _finish(f"verify z (z={z}, Δt={delta_t:g} s, {mode})", report.to_dict(), report.ok,
            report.first_problem, as_json)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


@verify_app.command("castle", help=_help(f"""Recompute k_s-anonymity and l-diversity of
OUTPUT, and check every released row against the input.

With --rules the checker reads the rules file itself (id, generalizer of each attribute,
domains, hierarchies, sensitive flags). Checks: every class of released rows with equal
quasi-identifiers holds >= k distinct individuals and >= l distinct values of each sensitive
attribute (an empty value never counts); with --diversity entropy or recursive (--c C),
each class also meets that rule on each sensitive attribute; with --input, every released
row stands for its own input row of the same individual: pass-through columns equal, a
\\[lo,hi] range contains the input value and lies within the domain, a hierarchy node is the
input's value or one of its ancestors, a *-mask agrees on every unmasked character; with
--suppressed too, every input row is released or suppressed exactly once (lines in
--rejects excepted).

k and l default to the rules' [parameters] table, else to `streamanon castle`'s defaults
(5 and 2): pass the values the release was made with. A release made across rule updates
that changed k or l has no rule version per row: pass the smallest k and l ever in force
(every class is checked against those). An empty release of a non-empty input is a problem
(nothing can be released when the input has fewer than k individuals or l sensitive values)
unless --allow-empty.

{EXIT_CODES}

Examples:

    streamanon verify castle out.csv --rules rules.toml --k 5 --l 2 --input in.csv

    streamanon verify castle out.csv --rules r.toml --input in.csv --suppressed s.csv
"""))
def verify_castle(
    ctx: typer.Context,
    output: str = typer.Argument(..., metavar="OUTPUT", help="Released rows (CSV with a "
                                 "header, or JSON Lines; a file or kafka://HOST:PORT/TOPIC, "
                                 "read to its end)."),
    rules_path: Path = typer.Option(None, "--rules", help="The TOML rules the release was "
                                    "made with (id, quasi-identifiers, sensitive attributes)."),
    k: int = typer.Option(5, "--k", min=1, help="Distinct individuals each class must hold "
                          "(default: the rules' [parameters] k, else castle's default: 5)."),
    l: int = typer.Option(2, "--l", min=0, help="Distinct values of each sensitive "  # noqa: E741
                          "attribute each class must hold; 0 or 1 = not checked (default: "
                          "the rules' [parameters] l, else castle's default: 2)."),
    source: str = typer.Option(None, "--input", help="The input rows: check that every "
                               "released row stands for its own input row."),
    suppressed: str = typer.Option(None, "--suppressed", help="The suppressed rows (castle "
                                   "--suppressed): check that nothing was lost (needs "
                                   "--input)."),
    rejects: str = typer.Option(None, "--rejects", help="The run's rejects file (JSON Lines): "
                                "its lines are left out of the accounting."),
    allow_empty: bool = typer.Option(False, "--allow-empty", help="Accept a release with no "
                                     "row."),
    id_field: str = typer.Option(None, "--id", help="Without --rules: the column naming the "
                                 "individual."),
    qi: list[str] = typer.Option(None, "--qi", help="Without --rules: quasi-identifier "
                                 "columns (repeat or comma-separate); their generalizations "
                                 "can then be checked only partly."),
    sa: list[str] = typer.Option(None, "--sa", help="Without --rules: sensitive columns."),
    diversity: str = typer.Option("distinct", "--diversity", help="The l-diversity rule the "
                                  "release was made with: distinct, entropy (entropy of each "
                                  "class's values >= ln l) or recursive ((c,l), needs --c); "
                                  "entropy and recursive are checked besides distinct l."),
    c: float = typer.Option(None, "--c", help="The c of --diversity recursive."),
    t: float = typer.Option(None, "--t", min=0, max=1, help="Check t-closeness: every "
                            "class's distribution of each sensitive attribute within earth "
                            "mover's distance t of --t-reference's."),
    t_reference: str = typer.Option(None, "--t-reference", help="With --t: the file the "
                                    "release's reference distribution was taken from."),
    closeness: str = typer.Option("auto", "--closeness", help="With --t: the ground distance "
                                  "the release was made with: auto (ordered for numbers, "
                                  "else equal), equal, ordered or hierarchical (needs "
                                  "--t-hierarchy)."),
    t_hierarchy: str = typer.Option(None, "--t-hierarchy", help="With --closeness "
                                    "hierarchical: the TOML file of the sensitive "
                                    "attributes' hierarchies the release was made with."),
    static: str = typer.Option(None, "--static", metavar="COL[,COL]", help="The "
                               "quasi-identifiers the release marked static (castle "
                               "--static): check them as the rules' static = true."),
    delimiter: str = typer.Option(",", "--delimiter", help=DELIMITER_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    from streamanon.verify._read import field_delimiter
    from streamanon.verify.castle import check_castle_files, columns_spec, load_rules

    if diversity != "distinct":  # the default, checked with k (no module of its own to load)
        from streamanon.verify.diversity import MEASURES

        if diversity not in MEASURES:
            fail(f"--diversity {diversity}: expected one of {', '.join(MEASURES)}")
    if (diversity == "recursive") != (c is not None) or (c is not None and not c > 0):
        fail("--c (a number > 0) goes with --diversity recursive, and only with it")
    if (t is None) != (t_reference is None):
        fail("--t and --t-reference go together")
    if (closeness == "hierarchical") != (t_hierarchy is not None):
        fail("--closeness hierarchical and --t-hierarchy go together")

    qis, sas = _split(qi), _split(sa)
    if rules_path is not None and (id_field or qis or sas):
        fail("give --rules, or --id with --qi and --sa, not both")
    try:
        if rules_path is not None:
            spec = load_rules(rules_path)
        elif id_field and qis:
            spec = columns_spec(id_field, qis, sas)
        else:
            fail("give --rules (or --id and --qi)")
    except ConfigError as exc:
        fail(f"{rules_path}: {exc}")
    except OSError as exc:
        fail(f"{exc.filename}: {exc.strerror}")
    for name in [c.strip() for c in (static or "").split(",") if c.strip()]:
        attr = next((a for a in spec.qi if a.name == name), None)
        if attr is None or attr.kind not in ("range", "hierarchy"):
            fail(f"--static {name}: not a range or hierarchy quasi-identifier of the rules")
        attr.static = True
    for name in ("k", "l"):  # not given: the rules' [parameters] value, when they set one
        source_of = ctx.get_parameter_source(name)  # (an enum of typer's click, by name)
        if name in spec.parameters and getattr(source_of, "name", "DEFAULT") == "DEFAULT":
            if name == "k":
                k = spec.parameters["k"]
            else:
                l = spec.parameters["l"]  # noqa: E741
    if l > 1 and not spec.sensitive:
        fail(f"l = {l} needs a sensitive attribute (none in the rules); pass --l 0 if the "
             "release was made without l-diversity")
    if suppressed is not None and source is None:
        fail("--suppressed needs --input (the accounting compares the two)")
    try:
        report = check_castle_files(output, spec, k=k, l=l, source=source,
                                    suppressed=suppressed, rejects=rejects,
                                    allow_empty=allow_empty,
                                    in_delimiter=field_delimiter(delimiter))
    except (InputError, ConfigError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename}: {exc.strerror}")
    summary = report.to_dict()
    ok, problem = report.ok, report.first_problem
    if diversity != "distinct" and l > 1:
        from streamanon.verify.diversity import check_diversity_file

        try:
            div = check_diversity_file(output, qi=[a.name for a in spec.qi],
                                       sensitive=spec.sensitive, measure=diversity, l=l, c=c)
        except (InputError, ConfigError) as exc:
            fail(str(exc))
        summary["diversity"] = div.to_dict()
        ok = ok and div.ok
        problem = problem or div.first_problem
    if t is not None:
        from streamanon.verify.diversity import (
            check_closeness,
            read_hierarchies,
            read_rows,
            reference_from_rows,
        )

        try:
            reference = reference_from_rows(read_rows(t_reference), spec.sensitive)
            trees = None if t_hierarchy is None else read_hierarchies(t_hierarchy)
            close = check_closeness(read_rows(output), qi=[a.name for a in spec.qi],
                                    sensitive=spec.sensitive, t=t, reference=reference,
                                    ground=closeness, hierarchies=trees)
        except (InputError, ConfigError) as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"{exc.filename}: {exc.strerror}")
        summary["closeness"] = close.to_dict()
        ok = ok and close.ok
        problem = problem or close.first_problem
    notes = []
    if source is None:
        notes.append("without --input only k and l were checked, not what each row stands for")
    if report.unverified:
        notes.append(f"{report.unverified} generalized value(s) could not be checked against "
                     "the input (" + ("plug-in generalizers" if rules_path else
                                      "give --rules to check hierarchy nodes") + ")")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    rule = "" if diversity == "distinct" else f", {diversity}" + (
        f" c={c:g}" if c is not None else "")
    rule += "" if t is None else f", t={t:g}"
    _finish(f"verify castle (k={k}, l={l}{rule})", summary, ok, problem, as_json)
