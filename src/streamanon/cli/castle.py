"""``streamanon castle``, ``experiment castle`` and the demo's CASTLE part (``verify castle``
lives in :mod:`streamanon.cli.verify`).

The run itself is :func:`streamanon.pipeline.run.run_castle` (re-exported here), the same for
every endpoint (file, stdin, ``kafka://``).
"""

from __future__ import annotations

import csv
import json
import shutil
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from streamanon.castle.defaults import DEFAULTS, Missing, Suppression, delta_below_k
from streamanon.cli.app import app, experiment_app
from streamanon.cli.common import (
    INPUT_FORMAT_HELP,
    JSON_DATA_HELP,
    JSON_HELP,
    OUTPUT_FORMAT_HELP,
    REJECTS_HELP,
    SUMMARY_HELP,
    check_format,
    fail,
    file_progress,
    on_error_option,
    print_summary,
    require_input,
    stderr_console,
    warn,
    write_summary,
    writing,
)
from streamanon.cli.config import config_option
from streamanon.cli.exitcodes import skip_teardown
from streamanon.cli.kafka import (
    batch_option,
    check_url,
    checkpoint_key_option,
    checkpoint_option,
    default_rejects,
    endpoint_errors,
    from_option,
    group_option,
    kafka_config,
    kafka_config_option,
    kafka_progress,
    kafka_run,
    max_message_option,
    options,
    until_end_option,
)
from streamanon.cli.zanon import delimiter_option, input_delimiter
from streamanon.errors import OnError

if TYPE_CHECKING:
    from streamanon.pipeline.run import run_castle

__all__ = ["castle_command", "castle_demo", "castle_warnings", "run_castle", "run_experiment"]



def __getattr__(name: str) -> Any:
    if name == "run_castle":  # exported: the runner of the command, loaded when asked for
        from streamanon.pipeline.run import run_castle

        return run_castle
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def castle_warnings(k: int, l: int, id_field: str, summary: dict[str, Any], *,  # noqa: E741
                    delta: int | None = None) -> None:
    """Say when k or l cannot be reached on this input (the run released nothing for it),
    and when δ < k (Prink's requirement; with δ + 1 < k every tuple is suppressed).

    Args:
        k: the run's k.
        l: the run's l.
        id_field: the rules' id column (named in the message).
        summary: the run's summary; each warning is added to its ``warnings``.
        delta: the run's δ, or ``None`` when the run has none to check.
    """
    msg = None if delta is None else delta_below_k(k, delta)
    if msg:
        warn(f"--delta {delta} --k {k}: {msg}", summary)
    if not summary["read"]:
        return
    for name, (lo, hi) in summary.get("domains_widened", {}).items():
        warn(f"attribute {name}: the data lies outside its rules' domain, widened to "
             f"[{lo:g}, {hi:g}] (losses are measured on it; fix the domain in the rules)",
             summary)
    seen = summary["individuals_seen"]["at_least"]
    if seen < k:
        warn(f"--k {k}: the input has only {seen} distinct individual(s) ({id_field}), so no "
             "cluster can reach k and nothing was released", summary)
    if l > 1:
        for name, counted in summary.get("sensitive_values_seen", {}).items():
            n = counted["at_least"]
            if n < l:
                warn(f"--l {l}: the sensitive attribute {name} has only {n} distinct "
                     "value(s), so no cluster can be l-diverse and nothing was released",
                     summary)


# DEFAULTS (streamanon.castle.defaults): the operator's own, so that every CASTLE command
# defaults alike; the operator and its imports load when a command runs, not for --help
K_HELP = "Distinct individuals (the rules' id column) per released cluster."
L_HELP = ("Distinct values of each sensitive attribute per released cluster (0 or 1 = no "
          "l-diversity).")
DELTA_HELP = "Delay bound: a tuple leaves at the latest after δ further tuples have arrived."
BETA_HELP = "Maximum number of open clusters (β)."
MU_HELP = "τ, the loss threshold for new clusters, is the mean loss of the last μ released " \
    "clusters."
ZETA_HELP = "Released clusters kept for reuse (ζ; 0 = no reuse)."
MISSING_HELP = ("An empty quasi-identifier: reject the tuple (an input error, as --on-error "
                "says), suppress it (counted as suppressed, reason 'missing value', no error) "
                "or star (it counts as the attribute's top: the tuple's cluster publishes "
                "that attribute fully generalized, * or the whole domain, loss 1). An empty "
                "id, sensitive value or time is an input error whatever this says.")
#: --missing of `castle` and `flink castle` (one declaration; the config key is ``missing``)
missing_option: Any = typer.Option(Missing(DEFAULTS["missing"]), "--missing",
                                   help=MISSING_HELP)


class DiversityChoice(StrEnum):
    """The rules of :mod:`streamanon.castle.diversity` (named here: the CLI loads without it)."""

    distinct = "distinct"
    entropy = "entropy"
    recursive = "recursive"


DIVERSITY_HELP = ("The l-diversity rule of each sensitive attribute in a released cluster: "
                  "distinct (>= l values), entropy (entropy of the values >= ln l) or "
                  "recursive ((c,l): the most frequent value occurs fewer than c times the "
                  "l-th to last most frequent together; needs --c).")
C_HELP = "The c of --diversity recursive (a number > 0)."
T_HELP = ("t-closeness: each released cluster's distribution of every sensitive attribute "
          "lies within earth mover's distance t (0..1) of the --t-reference distribution "
          "(ordered distance for numbers, equal distance otherwise).")
T_REFERENCE_HELP = ("With --t: a CSV (with a header) or JSON Lines file whose sensitive "
                    "columns give the reference distribution (e.g. the input itself, or an "
                    "earlier period's data); fixed for the run.")


class ClosenessChoice(StrEnum):
    """The ground distances of t-closeness (named here: the CLI loads without the rule)."""

    auto = "auto"
    equal = "equal"
    ordered = "ordered"
    hierarchical = "hierarchical"


CLOSENESS_HELP = ("With --t: the ground distance of the earth mover's distance: auto "
                  "(ordered for numbers, else equal), equal, ordered, or hierarchical (Li et "
                  "al.: values meet at their lowest common ancestor in --t-hierarchy).")
T_HIERARCHY_HELP = ("With --closeness hierarchical: a TOML file with a table per sensitive "
                    "attribute and its paths, root side first, as a hierarchy generalizer's "
                    "(e.g. [dx] paths = [[\"respiratory\", \"flu\"], ...]).")


def read_hierarchy(path: Path) -> dict[str, list[list[str]]]:
    """The sensitive attributes' hierarchies of ``--t-hierarchy`` (exit 2 when unusable)."""
    import tomllib

    require_input(path, "--t-hierarchy")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        fail(f"--t-hierarchy {path}: {exc}")
    out: dict[str, list[list[str]]] = {}
    for name, table in data.items():
        paths = table.get("paths") if isinstance(table, dict) else None
        if not isinstance(paths, list) or not all(isinstance(p, list) for p in paths):
            fail(f"--t-hierarchy {path}: [{name}] needs paths = [[...], ...]")
        out[name] = [[str(x) for x in p] for p in paths]
    return out


def read_reference(path: Path, names: list[str]) -> dict[str, dict[str, int]]:
    """The reference distribution of the sensitive attributes ``names`` in the file."""
    from streamanon.castle.diversity import reference_of

    require_input(path, "--t-reference")
    with path.open(encoding="utf-8", newline="") as fh:
        if path.suffix in (".jsonl", ".ndjson", ".json"):
            rows = [json.loads(line) for line in fh if line.strip()]
        else:
            rows = list(csv.DictReader(fh))
    return reference_of(rows, names)


DP_EPSILON_HELP = ("CASTLEGUARD's differential privacy: Laplace noise of scale R/ε on every "
                   "range quasi-identifier before clustering (R: the rules' domain width, "
                   "values clamped to it; without a domain, the width seen so far). Per "
                   "tuple and attribute; what it protects and what not: docs, privacy "
                   "models. The noise comes from the operating system's random source.")
DP_BETA_HELP = ("CASTLEGUARD's β-sampling: each tuple is kept with probability β (0 < β <= "
                "1); the others are suppressed with the reason 'not sampled (dp-beta)'.")


STATIC_HELP = ("Mark these quasi-identifiers (comma-separated) static, as the rules' "
               "static = true does: constant per individual, so every release of an "
               "individual covers its first one (its anchor) and intersecting its releases "
               "narrows nothing below that class. Ranges and hierarchies only.")
STATIC_TTL_HELP = ("With static attributes: forget an individual's anchor after this much "
                   "stream time (the rules' time column, seconds) without a release or a "
                   "held tuple of it. Default: never (the anchors grow with every "
                   "individual). An individual seen again after that gets a new anchor: its "
                   "releases before and after can be intersected.")
STATIC_MAX_HELP = ("With static attributes: keep at most this many anchors, the least "
                   "recently used forgotten first (the same caveat as --static-ttl).")
#: --static, --static-ttl, --static-max of `castle` and `flink castle`
static_option: Any = typer.Option(None, "--static", metavar="COL[,COL]", help=STATIC_HELP)
static_ttl_option: Any = typer.Option(None, "--static-ttl", min=0, help=STATIC_TTL_HELP)
static_max_option: Any = typer.Option(None, "--static-max", min=1, help=STATIC_MAX_HELP)


def static_names(text: str | None) -> list[str] | None:
    """The columns of ``--static`` (``None``: none given)."""
    names = [c.strip() for c in (text or "").split(",") if c.strip()]
    return names or None


RISK_HELP = ("Add the released rows' re-identification risk to the summary (prosecutor, "
             "journalist and marketer risk, sample uniques, smallest class: the figures of "
             "`streamanon risk` on the output file) over the rules' quasi-identifiers; needs "
             "a file --output.")
RISK_QI_HELP = "With --risk (implied): the quasi-identifier columns (default: the rules')."
RISK_WINDOW_HELP = "With --risk (implied): also the worst window of this many released rows."
RISK_METRICS_HELP = ("With --risk (implied): also write the whole release's figures as "
                     "Prometheus gauges (streamanon_release_*, text format) to this file, "
                     "for a textfile collector (replaced at the end of the run).")


METRICS_PORT_HELP = ("Serve the run's live figures as Prometheus metrics over HTTP on this "
                     "port (0: a free port; the address is said on stderr and in the "
                     "summary): tuples read, released, suppressed by reason, held, anchors "
                     "kept and forgotten, and the released rows' re-identification risk "
                     "gauges (streamanon_release_*, over --risk-qi or the rules' "
                     "quasi-identifiers; the last complete --risk-window of released rows, "
                     "else the whole release). Plain HTTP: see --metrics-host.")
METRICS_HOST_HELP = ("With --metrics-port: the address to listen on (default: loopback only; "
                     "the metrics carry counts and risk figures, no data).")


def start_metrics(port: int | None, host: str, operator: Any, qis: list[str],
                  window: int | None) -> tuple[Any, Any]:
    """The metrics endpoint of ``--metrics-port`` (``(None, None)`` without it): the server
    and the holder of the live operator (``holder[0]``; a Kafka run's restored one is put
    there). The operator counts its released classes for the risk gauges.

    Args:
        port: the port (0: a free one), ``None``: no endpoint.
        host: the address to listen on.
        operator: the run's operator.
        qis: the quasi-identifiers of the risk gauges.
        window: the released rows per window of the risk gauges (``None``: the whole
            release).
    """
    if port is None:
        return None, None
    try:
        from streamanon.net.metrics import CastleRunMetrics, serve_plain
    except ModuleNotFoundError as exc:
        from streamanon.extras import install_hint

        fail(f"--metrics-port: {install_hint(exc) or exc}")
    from streamanon.risk import RunningRisk

    operator.release_risk = RunningRisk(qis, window=window)
    holder = [operator]
    try:
        server = serve_plain(CastleRunMetrics(lambda: holder[0]).registry, host, port)
    except OSError as exc:
        fail(f"--metrics-port {port}: {exc.strerror or exc}")
    bound = server.server_address
    address = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
    server.address = address  # type: ignore[attr-defined]
    stderr_console().print(f"streamanon castle: metrics on http://{address}/metrics",
                           markup=False, highlight=False)
    return server, holder


def _settled(holder: Any, qis: list[str], window: int | None) -> Any:
    """``on_stage`` of a Kafka run with a metrics port: its operator (restored from the
    checkpoint on a restart) goes into ``holder``, keeping the checkpoint's risk counts when
    they are of the same columns and window."""
    def settle(stage: Any) -> None:
        from streamanon.risk import RunningRisk

        op = stage.op
        risk = getattr(op, "release_risk", None)
        if risk is None or (risk.qis, risk.window) != (qis, window):
            op.release_risk = RunningRisk(qis, window=window)
        holder[0] = op
    return settle


def _risk_columns(risk: bool, risk_qi: str | None, window: int | None,
                 metrics: Path | None, rules_qis: list[str], output: str) -> list[str]:
    """The quasi-identifiers of ``--risk`` (empty: no risk figures); exits 2 when the
    output is not a file."""
    from streamanon.pipeline.kafka.options import is_kafka

    if not (risk or risk_qi or window or metrics):
        return []
    qis = [q.strip() for q in (risk_qi or "").split(",") if q.strip()] or rules_qis
    if not qis:
        fail("--risk: no quasi-identifier (the rules have none; name them with --risk-qi)")
    if output == "-" or is_kafka(output):
        fail("--risk reads the released rows back from the --output file: give a file "
             "(then run `streamanon risk` on a topic's or stdout's rows yourself)")
    return qis


def _release_risk(path: str | Path, fmt: str, qis: list[str], window: int | None,
                 metrics: Path | None) -> dict[str, Any]:
    """The ``risk`` entry of the summary: :func:`streamanon.cli.risk.file_risk` on the
    released rows, and the gauges file of ``--risk-metrics``."""
    from streamanon.cli.risk import file_risk

    figures = file_risk(path, qis, fmt=fmt, window=window)
    if metrics is not None:
        try:
            from streamanon.net.metrics import ReleaseRiskMetrics
        except ModuleNotFoundError as exc:
            from streamanon.extras import install_hint

            fail(f"--risk-metrics: {install_hint(exc) or exc}")
        gauges = ReleaseRiskMetrics()
        gauges.update(figures["overall"])
        try:
            gauges.write(metrics)
        except OSError as exc:
            fail(f"--risk-metrics {metrics}: {exc.strerror}")
        figures["metrics"] = str(metrics)
    return figures


class HierarchyScopeChoice(StrEnum):
    """Where a categorical's GLM is measured (named here: the CLI loads without the rules)."""

    shared = "shared"
    cluster = "cluster"


HIERARCHY_SCOPE_HELP = ("Where a categorical's GLM is measured: shared (one tree per rule "
                        "set, grown by every cluster's values) or cluster (each released "
                        "cluster's own tree: the configured one and its values' paths, as "
                        "Prink). The released node is the same; the rules' hierarchy_scope "
                        "wins.")


class SplitChoice(StrEnum):
    """The splits of :mod:`streamanon.castle.split` (named here: the CLI loads without it)."""

    prink = "prink"
    median = "median"
    window = "window"


@app.command("castle")
def castle_command(
    source: str = typer.Argument(..., metavar="INPUT", help="Input rows: CSV with a header, "
                                 "or JSON Lines; - = stdin; kafka://HOST:PORT/TOPIC = a topic, "
                                 "one row per message (CSV under --columns or the first "
                                 "message, or a JSON object), exactly once."),
    rules_path: Path = typer.Option(..., "--rules", help="TOML rules file: the id column, and "
                                    "per attribute its generalizer, sensitive flag and weight "
                                    "(every key: docs, CASTLE guide)."),
    k: int = typer.Option(DEFAULTS["k"], "--k", min=1, help=K_HELP),
    l: int = typer.Option(DEFAULTS["l"], "--l", min=0, help=L_HELP),  # noqa: E741
    diversity: DiversityChoice = typer.Option(DiversityChoice(DEFAULTS["diversity"]),
                                              "--diversity", help=DIVERSITY_HELP),
    c: float = typer.Option(DEFAULTS["c"], "--c", help=C_HELP),
    t: float = typer.Option(DEFAULTS["t"], "--t", min=0, max=1, help=T_HELP),
    t_reference: Path = typer.Option(None, "--t-reference", help=T_REFERENCE_HELP),
    closeness: ClosenessChoice = typer.Option(ClosenessChoice(DEFAULTS["closeness"]),
                                              "--closeness", help=CLOSENESS_HELP),
    t_hierarchy: Path = typer.Option(None, "--t-hierarchy", help=T_HIERARCHY_HELP),
    delta: int = typer.Option(DEFAULTS["delta"], "--delta", min=1, help=DELTA_HELP),
    beta: int = typer.Option(DEFAULTS["beta"], "--beta", min=1, help=BETA_HELP),
    mu: int = typer.Option(DEFAULTS["mu"], "--mu", min=1, help=MU_HELP),
    zeta: int = typer.Option(DEFAULTS["zeta"], "--zeta", min=0, help=ZETA_HELP),
    max_delay: float = typer.Option(None, "--max-delay", min=0, help="Also release a tuple at "
                                    "the latest this many seconds after it (by the rules' time "
                                    "column)."),
    suppression: Suppression = typer.Option(Suppression.drop, "--suppression",
                                            help="What --suppressed receives: drop (the tuple "
                                            "as read), null (empty quasi-identifiers) or "
                                            "generalize (maximal generalization)."),
    split: SplitChoice = typer.Option(SplitChoice(DEFAULTS["split"]), "--split",
                                      help="What leaves when a tuple expires: window (the "
                                      "default: median cuts over every held tuple, all "
                                      "released, released classes reused: the least loss at "
                                      "a bounded delay), or CASTLE's cluster, one of >= 2k "
                                      "individuals split by prink (groups of whole "
                                      "individuals: the papers' behaviour) or median "
                                      "(Mondrian's median cuts)."),
    missing: Missing = missing_option,
    dp_epsilon: float = typer.Option(DEFAULTS["dp_epsilon"], "--dp-epsilon", min=0,
                                     help=DP_EPSILON_HELP),
    dp_beta: float = typer.Option(DEFAULTS["dp_beta"], "--dp-beta", min=0, max=1,
                                  help=DP_BETA_HELP),
    hierarchy_scope: HierarchyScopeChoice = typer.Option(
        HierarchyScopeChoice(DEFAULTS["hierarchy_scope"]), "--hierarchy-scope",
        help=HIERARCHY_SCOPE_HELP),
    static: str = static_option,
    static_ttl: float = static_ttl_option,
    static_max: int = static_max_option,
    output: str = typer.Option("-", "-o", "--output", help="Released rows (same columns as the "
                               "input; ranges as [lo,hi]); - = stdout; .jsonl writes JSON "
                               "Lines; kafka://HOST:PORT/TOPIC one message per row (no "
                               "header). A file is replaced only when the run succeeds (with a "
                               "Kafka INPUT: appended, exactly once)."),
    suppressed: str = typer.Option(None, "--suppressed", help="Write suppressed tuples here "
                                   "(a file or kafka://..., with a reason column); else they "
                                   "are only counted."),
    loss_column: str = typer.Option(None, "--loss-column", help="Add a column with each "
                                    "tuple's cluster information loss."),
    in_format: str = typer.Option(None, "--input-format", help=INPUT_FORMAT_HELP),
    out_format: str = typer.Option(None, "--output-format", help=OUTPUT_FORMAT_HELP),
    on_error: OnError = on_error_option,
    delimiter: str = delimiter_option,
    rejects: str = typer.Option(None, "--rejects", help=REJECTS_HELP + " A file or "
                                "kafka://... Default: OUTPUT.rejects.jsonl (a topic: "
                                "OUTPUT.rejects; with -o -: only counted)."),
    columns: str = typer.Option(None, "--columns", help="Kafka INPUT of CSV messages: the "
                                "comma-separated column names (default: the first message "
                                "is the header)."),
    group: str = group_option,
    start: str = from_option,
    until_end: bool = until_end_option,
    checkpoint_every: float = checkpoint_option,
    max_message_bytes: int = max_message_option,
    batch_size: int = batch_option,
    checkpoint_key: Path = checkpoint_key_option,
    config_file: Path = kafka_config_option,
    as_json: bool = typer.Option(False, "--json", help=JSON_DATA_HELP),
    summary_file: Path = typer.Option(None, "--summary", help=SUMMARY_HELP),
    risk: bool = typer.Option(False, "--risk", help=RISK_HELP),
    risk_qi: str = typer.Option(None, "--risk-qi", metavar="QI,...", help=RISK_QI_HELP),
    risk_window: int = typer.Option(None, "--risk-window", min=1, help=RISK_WINDOW_HELP),
    risk_metrics: Path = typer.Option(None, "--risk-metrics", help=RISK_METRICS_HELP),
    metrics_port: int = typer.Option(None, "--metrics-port", min=0, max=65535,
                                     help=METRICS_PORT_HELP),
    metrics_host: str = typer.Option("127.0.0.1", "--metrics-host", help=METRICS_HOST_HELP),
    config: Path | None = config_option,
) -> None:
    """k_s-anonymize a stream with CASTLE (and l-diversity): clusters of >= k individuals.

    Exit 2 on bad input (nothing written). A Kafka INPUT runs exactly once across crashes,
    open clusters included, until Ctrl-C or SIGTERM (exit 0; the clusters still open wait in
    the checkpoint for the next run), or to the end with --until-end. Example (files from
    `streamanon demo`):

        streamanon castle --rules rules.toml --k 5 --l 2 in.csv -o out.csv
    """
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.errors import StreamanonError
    from streamanon.io import detect_format
    from streamanon.pipeline.kafka.options import is_kafka

    in_format = check_format(in_format, "--input-format")
    out_format = check_format(out_format, "--output-format")
    sep = input_delimiter(delimiter)
    for spec, option in ((source, "INPUT"), (output, "--output"), (rejects, "--rejects"),
                         (suppressed, "--suppressed")):
        if spec is not None:
            check_url(spec, option)
    require_input(rules_path, "--rules")
    try:
        rules = RuleSet.load(rules_path)
    except (OSError, StreamanonError) as exc:
        fail(f"--rules {rules_path}: {exc}")
    if not is_kafka(source):
        require_input(source)
    if (t is None) != (t_reference is None):
        fail("--t and --t-reference go together")
    risk_qis = _risk_columns(risk, risk_qi, risk_window, risk_metrics, rules.quasi_identifiers,
                            output)
    reference = None if t_reference is None else read_reference(t_reference, rules.sensitive)
    if (closeness is ClosenessChoice.hierarchical) != (t_hierarchy is not None):
        fail("--closeness hierarchical and --t-hierarchy go together")
    hierarchy = None if t_hierarchy is None else read_hierarchy(t_hierarchy)
    try:
        operator = CastleAnonymizer(rules, k=k, l=l, delta=delta, beta=beta, mu=mu, zeta=zeta,
                                    suppression=suppression, split=split.value,
                                    max_delay=max_delay, loss_field=loss_column,
                                    diversity=diversity.value, c=c, t=t, reference=reference,
                                    closeness=closeness.value, t_hierarchy=hierarchy,
                                    missing=missing, dp_epsilon=dp_epsilon, dp_beta=dp_beta,
                                    hierarchy_scope=hierarchy_scope.value,
                                    static=static_names(static), static_ttl=static_ttl,
                                    static_max=static_max)
    except StreamanonError as exc:
        fail(str(exc))
    # the rules' [parameters] table overrides the options: the title and warnings name those
    k, l, delta = operator.parameters.k, operator.parameters.l, operator.parameters.delta  # noqa: E741
    if on_error is OnError.skip and rejects is None and output != "-":
        rejects = default_rejects(output)
    out_format = out_format or detect_format(None if output == "-" or is_kafka(output)
                                             else output)
    cols = [c.strip() for c in columns.split(",")] if columns else None
    title = f"streamanon castle (k={k}, l={l}, δ={delta})"
    kafka_args = dict(group=group, start=start, until_end=until_end,
                      checkpoint_every=checkpoint_every, max_message_bytes=max_message_bytes,
                      batch_size=batch_size, checkpoint_key=checkpoint_key,
                      config=kafka_config(config_file))
    metrics_qis = [q.strip() for q in (risk_qi or "").split(",") if q.strip()
                   ] or rules.quasi_identifiers
    server, holder = start_metrics(metrics_port, metrics_host, operator, metrics_qis,
                                   risk_window)
    try:
        _run_command(source=source, output=output, operator=operator, rules=rules,
                     rules_path=rules_path, in_format=in_format, out_format=out_format,
                     on_error=on_error, rejects=rejects, suppressed=suppressed, cols=cols,
                     sep=sep, kafka_args=kafka_args, until_end=until_end,
                     summary_file=summary_file, risk_qis=risk_qis, risk_window=risk_window,
                     risk_metrics=risk_metrics, k=k, l=l, delta=delta, title=title,
                     as_json=as_json, server=server, holder=holder, metrics_qis=metrics_qis)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


def _run_command(*, source: str, output: str, operator: Any, rules: Any, rules_path: Path,
                 in_format: str | None, out_format: str, on_error: OnError,
                 rejects: str | None, suppressed: str | None, cols: list[str] | None,
                 sep: str, kafka_args: dict[str, Any], until_end: bool,
                 summary_file: Path | None, risk_qis: list[str], risk_window: int | None,
                 risk_metrics: Path | None, k: int, l: int, delta: int,  # noqa: E741
                 title: str, as_json: bool, server: Any, holder: Any,
                 metrics_qis: list[str]) -> None:
    """The run of :func:`castle_command` once its options are checked (the metrics server,
    if any, runs around it)."""
    from streamanon.io import detect_format
    from streamanon.pipeline.kafka.options import is_kafka
    from streamanon.pipeline.run import run_castle

    def with_metrics(summary: dict[str, Any]) -> None:
        if server is not None:
            summary["metrics"] = {"address": server.address}

    if is_kafka(source):
        import hashlib

        rules_digest = hashlib.sha256(rules_path.read_bytes()).hexdigest()
        with writing([rules_path]) as outs:
            summary_tmp = outs.add(summary_file, "--summary") if summary_file else None
            with kafka_run(until_end) as stop, kafka_progress(source) as tick:
                opts = options(**kafka_args, stop=stop, on_batch=tick,
                               identity={"rules_sha256": rules_digest})
                if holder is not None:
                    opts.on_stage = _settled(holder, metrics_qis, risk_window)
                stats = run_castle(source, output, operator, in_format=in_format,
                                   out_format=out_format, on_error=on_error,
                                   rejects_path=rejects, suppressed_path=suppressed,
                                   columns=cols, delimiter=sep, kafka=opts)
                summary: dict[str, Any] = stats.to_dict()
                with_metrics(summary)
                summary["outputs"] = [str(t) for t in (output, suppressed, rejects)
                                      if t is not None]
                if risk_qis:
                    summary["risk"] = _release_risk(output, out_format, risk_qis, risk_window,
                                                   risk_metrics)
                castle_warnings(k, l, rules.id_field, summary, delta=delta)
                write_summary(summary_tmp, summary)
        print_summary(title, summary, as_json, stdout_has_data=output == "-")
        return
    with writing([source, rules_path], skip_hint=on_error is OnError.fail) as outs:
        out = output if is_kafka(output) else outs.add(output, "--output")

        def target(spec: str | None, option: str) -> str | None:
            return spec if spec is None or is_kafka(spec) else outs.add(spec, option)

        sup_tmp = target(suppressed, "--suppressed")
        rejects_tmp = target(rejects, "--rejects")
        summary_tmp = outs.add(summary_file, "--summary") if summary_file else None
        with file_progress(source, f"CASTLE k={k} l={l}", min_bytes=2 << 20) as progress, \
                endpoint_errors():
            stats = run_castle(source, out, operator, in_format=in_format,
                               out_format=out_format, on_error=on_error,
                               rejects_path=rejects_tmp,
                               rejects_name=None if rejects is None else str(rejects),
                               suppressed_path=sup_tmp,
                               suppressed_format=None if suppressed is None or is_kafka(
                                   suppressed) else detect_format(suppressed),
                               progress=progress, kafka=options(**kafka_args),
                               delimiter=sep)
        summary = stats.to_dict()
        with_metrics(summary)
        summary["outputs"] = [*[t for t in (output, suppressed, rejects)
                                if t is not None and is_kafka(t)], *outs.targets]
        if risk_qis:
            summary["risk"] = _release_risk(out, out_format, risk_qis, risk_window, risk_metrics)
        castle_warnings(k, l, rules.id_field, summary, delta=delta)
        write_summary(summary_tmp, summary)
    print_summary(title, summary, as_json, stdout_has_data=output == "-")
    # every file is committed: the interpreter's teardown (its last collections walk numba's
    # and the run's objects, ~0.5 s) does nothing a file needs
    skip_teardown()


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{option} {text}: expected comma-separated integers")
    if not values:
        fail(f"{option} {text}: expected at least one integer")
    return values


#: CASTLE parameters the experiment's CSV does not list (the grid leaves them at their
#: defaults; its columns stay those of earlier runs).
EXPERIMENT_UNLISTED = ("suppression", "max_delay", "loss_field", "split", "diversity", "c",
                       "t", "reference", "closeness", "t_hierarchy", "missing", "dp_epsilon",
                       "dp_beta", "dp_rng", "hierarchy_scope", "static", "static_ttl",
                       "static_max")

#: What the information-loss plot highlights, and what the tables report as "loss 7 num.".
SEVEN_NAME = "numeric QIs (tables: 'loss 7 num.')"


def run_experiment(
    workdir: Path, ks: list[int], deltas: list[int], ls: list[int], *, n: int, beta: int,
    mu: int, zeta: int, seed: int, show_progress: bool = True,
) -> tuple[Path, list[dict[str, Any]], list[Path]]:
    """Run the grid on the ASHRAE-shaped stream; returns the CSV, its rows and the plots.

    The data and the rules are written first (inputs of every run); the CSV of runs and the
    plots are replaced only when the whole grid has run (an :class:`OutputSet`).

    Args:
        workdir: the folder of the data, the rules, the CSV of runs and the plots.
        ks: the values of k of the grid.
        deltas: the values of δ of the grid.
        ls: the values of l of the grid.
        n: tuples in the generated ASHRAE-shaped stream.
        beta: CASTLE's β.
        mu: CASTLE's μ.
        zeta: CASTLE's ζ.
        seed: the seed of the generated stream.
        show_progress: show a progress bar on the console.
    """
    from rich.progress import Progress

    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.data import ashrae
    from streamanon.pipeline.file_outputs import OutputSet
    from streamanon.pipeline.run import run_castle
    from streamanon.pipeline.stages import listed_params

    workdir.mkdir(parents=True, exist_ok=True)
    data = ashrae.write_csv(workdir / f"castle-ashrae_n{n}_seed{seed}.csv",
                            ashrae.generate(n, seed=seed))
    rules_file = workdir / "castle-ashrae-rules.toml"
    rules_file.write_text(ashrae.rules_toml())
    grid = [(k, d, l) for d in deltas for k in ks for l in ls]  # noqa: E741
    results: list[dict[str, Any]] = []
    csv_path = workdir / "castle-experiment.csv"
    with OutputSet([data, rules_file]) as outs:
        csv_tmp = outs.add(csv_path, "--workdir")
        with Progress(console=stderr_console(), disable=not show_progress) as progress:
            task = progress.add_task("CASTLE grid", total=len(grid))
            for k, d, l in grid:  # noqa: E741
                op = CastleAnonymizer(RuleSet.load(rules_file), k=k, l=l, delta=d, beta=beta,
                                      mu=mu, zeta=zeta, split="prink")  # the paper's CASTLE
                out = workdir / f".castle-out_k{k}_d{d}_l{l}.partial.csv"  # measured, dropped
                try:
                    stats = run_castle(data, out, op, latency=True)
                finally:
                    out.unlink(missing_ok=True)
                det = stats.details
                per_tuple = max(1, stats.read)
                best_ms = 1000 * det["best_selection_s"] / per_tuple
                delay_ms = 1000 * det["delay_constraint_s"] / per_tuple
                row: dict[str, Any] = {  # the grid's axes, then the other parameters
                    "k": k, "delta": d, "l": l,
                    **listed_params(op, omit=("k", "delta", "l", *EXPERIMENT_UNLISTED)),
                    "n": n, "seed": seed, "read": stats.read, "released": stats.released,
                    "suppressed": stats.suppressed, "seconds": det["seconds"],
                    "tuples_per_second": det["tuples_per_second"],
                    "mean_info_loss": det["mean_info_loss"],
                    "mean_info_loss_seven_numeric": round(sum(
                        det["info_loss"][a] for a in ashrae.SEVEN_NUMERIC) / 7, 6),
                    "latency_ms": round(det["latency_ms"], 4),
                    "best_selection_ms": round(best_ms, 5),
                    "delay_constraint_ms": round(delay_ms, 5),
                    "waiting_ms": round(max(0.0, det["latency_ms"] - best_ms - delay_ms), 4),
                }
                row.update({f"info_loss_{a}": v for a, v in det["info_loss"].items()})
                results.append(row)
                progress.advance(task)
        with open(csv_tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(results[0]))
            w.writeheader()
            w.writerows(results)
        from streamanon.plots import castle_info_loss_vs_k, castle_latency

        plots = []
        attrs = [*ashrae.NUMERIC_QI, "primary_use"]
        for l in ls:  # noqa: E741
            sel = [r for r in results if r["l"] == l]
            loss_png = workdir / f"castle-info-loss-vs-k_l{l}.png"
            castle_info_loss_vs_k(
                sel, attrs, outs.add(loss_png, "--workdir"),
                f"CASTLE information loss per attribute vs k (l={l}, {n:,} ASHRAE-shaped "
                f"tuples, β={beta}, μ={mu}, ζ={zeta})", highlight=ashrae.SEVEN_NUMERIC,
                highlight_name=SEVEN_NAME)
            latency_png = workdir / f"castle-latency-vs-k_l{l}.png"
            castle_latency(
                sel, outs.add(latency_png, "--workdir"),
                f"CASTLE latency per tuple vs k and δ (l={l}, β={beta}, μ={mu}, ζ={zeta})")
            plots += [loss_png, latency_png]
    return csv_path, results, plots


@experiment_app.command("castle")
def experiment_castle(
    workdir: Path = typer.Option(Path("streamanon-experiments/castle"), "--workdir",
                                 help="Where the data, the CSV of runs and the plots go "
                                 "(created)."),
    ks: str = typer.Option("5,10,20,40,80", "--k", help="Comma-separated k values."),
    deltas: str = typer.Option("1250,5000,20000", "--delta", help="Comma-separated δ values."),
    ls: str = typer.Option("0,2,4,8", "--l", help="Comma-separated l values."),
    n: int = typer.Option(30_000, "--n", min=1, help="Tuples of the ASHRAE-shaped stream."),
    beta: int = typer.Option(DEFAULTS["beta"], "--beta", min=1, help=BETA_HELP),
    mu: int = typer.Option(DEFAULTS["mu"], "--mu", min=1, help=MU_HELP + " Prink's "
                           "evaluation used 100."),
    zeta: int = typer.Option(DEFAULTS["zeta"], "--zeta", min=0, help=ZETA_HELP + " Prink's "
                             "evaluation used 0."),
    seed: int = typer.Option(1, "--seed", help="Seed of the generated stream."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The Prink paper's grid (k x δ x l, or a subset) on the ASHRAE-shaped stream.

    One CSV row per run (every parameter named), PNG plots of information loss vs k per δ and
    of latency vs k and δ. β, μ and ζ default to `streamanon castle`'s. Example:

        streamanon experiment castle --k 5,20 --delta 1250 --l 0,2 --n 5000
    """
    k_list, d_list, l_list = _ints(ks, "--k"), _ints(deltas, "--delta"), _ints(ls, "--l")
    with writing([]):
        csv_path, results, plots = run_experiment(
            workdir, k_list, d_list, l_list, n=n, beta=beta, mu=mu, zeta=zeta, seed=seed,
            show_progress=not as_json and stderr_console().is_terminal)
    summary = {"csv": str(csv_path), "runs": len(results), "plots": [str(p) for p in plots]}
    if as_json:
        print(json.dumps(summary))
    else:
        from rich.table import Table

        table = Table(title=f"CASTLE grid on {n:,} ASHRAE-shaped tuples")
        for col in ("k", "δ", "l", "suppressed", "loss (7 numeric)", "latency ms", "tuples/s"):
            table.add_column(col, justify="right")
        for r in results:
            table.add_row(str(r["k"]), str(r["delta"]), str(r["l"]), f"{r['suppressed']:,}",
                          f"{r['mean_info_loss_seven_numeric']:.3f}", f"{r['latency_ms']:.2f}",
                          f"{r['tuples_per_second']:,}")
        stderr_console().print(table)
        stderr_console().print(f"runs: {csv_path}; plots: {', '.join(str(p) for p in plots)}",
                               markup=False)


def castle_demo(workdir: Path, seed: int, n: int = 4_450) -> dict[str, Any]:
    """CASTLE (k=5, l=2, δ=1250, the other parameters at their defaults) on a slice of the
    ASHRAE-shaped stream; verified; information loss vs k plotted.

    Also writes ``in.csv`` and ``rules.toml``, the files of the README's quick tour.
    """
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.data import ashrae
    from streamanon.errors import CheckerFailure
    from streamanon.pipeline.file_outputs import OutputSet
    from streamanon.pipeline.run import run_castle
    from streamanon.verify.castle import check_castle_files, load_rules

    data = ashrae.write_csv(workdir / f"castle-ashrae_n{n}_seed{seed}.csv",
                            ashrae.generate(n, seed=seed))
    rules_file = workdir / "castle-ashrae-rules.toml"
    rules_file.write_text(ashrae.rules_toml())
    shutil.copyfile(data, workdir / "in.csv")
    shutil.copyfile(rules_file, workdir / "rules.toml")
    rules = RuleSet.load(rules_file)
    k, l, delta = 5, 2, 1250  # noqa: E741
    out = workdir / f"castle-released_k{k}_l{l}_d{delta}.csv"
    with OutputSet([data]) as outs:
        stats = run_castle(data, outs.add(out), CastleAnonymizer(rules, k=k, l=l, delta=delta))
    report = check_castle_files(out, load_rules(rules_file), k=k, l=l, source=data)
    if not report.ok:
        raise CheckerFailure(f"CASTLE checker failed: {report.first_problem}")
    det = stats.details
    p = stats.params
    from rich.table import Table

    table = Table(title=f"CASTLE on {data.name} (k={k}, l={l}, δ={delta}, β={p['beta']}, "
                        f"μ={p['mu']}, ζ={p['zeta']})")
    for col in ("released", "suppr.", "classes", "min ids", "loss 7 num.", "checker",
                "tuples/s"):
        table.add_column(col, justify="right")
    seven = sum(det["info_loss"][a] for a in ashrae.SEVEN_NUMERIC) / 7
    table.add_row(f"{stats.released:,}", f"{stats.suppressed:,}", f"{report.classes:,}",
                  str(report.min_individuals), f"{seven:.3f}", "ok",
                  f"{det['tuples_per_second']:,}")
    stderr_console().print(table)
    # the trade-off a user tunes: information loss against k (same data, same δ and l)
    from streamanon.plots import castle_info_loss_vs_k  # matplotlib: only when plotting

    sweep = []
    for kk in (2, 5, 10, 20):
        if kk == k:
            st = stats
        else:
            with OutputSet([data]) as outs:
                st = run_castle(data, outs.add(workdir / f"castle-released_k{kk}_l{l}_d{delta}"
                                               ".csv"),
                                CastleAnonymizer(rules, k=kk, l=l, delta=delta))
        sweep.append({"k": kk, "delta": delta, **{
            f"info_loss_{a}": v for a, v in st.details["info_loss"].items()}})
    with OutputSet() as outs:
        plot = workdir / f"castle-info-loss-vs-k_l{l}_d{delta}.png"
        castle_info_loss_vs_k(
            sweep, list(det["info_loss"]), outs.add(plot),
            f"CASTLE: information loss vs k ({n:,} ASHRAE-shaped tuples, l={l})",
            highlight=ashrae.SEVEN_NUMERIC, highlight_name=SEVEN_NAME)
    stderr_console().print(f"plot: {plot}", markup=False)
    return {"input": str(data), "output": str(out), **stats.to_dict(),
            "checker": report.to_dict(), "plot": str(plot), "loss_vs_k": sweep}
