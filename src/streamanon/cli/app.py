"""The typer application objects; command modules attach themselves to these.

Design: docs/design/cli.md
"""

from __future__ import annotations

import importlib
import importlib.machinery
import inspect
import re
import sys
import types
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, ClassVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup, TyperOption

_typed = TyperOption.display_type_rich


def _flag_or_type(self: TyperOption, ctx: Any) -> str | None:
    """A flag (``--json``, ``--help``) takes no value: shown without a type, where typer
    would write ``<bool>`` (and ``--json true`` is refused)."""
    return None if self.is_flag and not self.count else _typed(self, ctx)


TyperOption.display_type_rich = _flag_or_type  # type: ignore[method-assign]


class _Markdown:
    """Stands in for ``rich.markdown.Markdown`` in typer's help renderer, which only makes
    one in ``rich_markup_mode="markdown"`` (not this app's): the real one when called."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from rich.markdown import Markdown

        return Markdown(*args, **kwargs)


class _Traceback:
    """Stands in for ``rich.traceback.Traceback`` in typer's help renderer, which only makes
    one for pretty exceptions (off in this app): the real one when asked for."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from rich.traceback import Traceback

        return Traceback(*args, **kwargs)

    @classmethod
    def from_exception(cls, *args: Any, **kwargs: Any) -> Any:
        from rich.traceback import Traceback

        return Traceback.from_exception(*args, **kwargs)


#: What typer's help renderer imports but uses only in modes this app does not use: markdown
#: help (markdown_it, pygments' lexers) and rich tracebacks, 0.1 s of every ``--help``.
_DEFERRED = {"rich.markdown": ("Markdown", _Markdown),
             "rich.traceback": ("Traceback", _Traceback)}


class _StubbedLoader:
    """Runs the real loader of ``typer.rich_utils`` with :data:`_DEFERRED` in
    ``sys.modules`` for the time of its import (then gone: a later ``import rich.markdown``
    gets the real module)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        stubs = {}
        for name, (attr, stand_in) in _DEFERRED.items():
            if name not in sys.modules:
                stubs[name] = sys.modules[name] = types.ModuleType(name)
                setattr(stubs[name], attr, stand_in)
        try:
            self._loader.exec_module(module)
        finally:
            for name, stub in stubs.items():
                if sys.modules.get(name) is stub:
                    del sys.modules[name]


class _PlainPickleLoader:
    """Runs the real loader of ``pyarrow`` with ``cloudpickle`` unimportable for the time of
    its import: pyarrow then binds the standard ``pickle``, which it uses only to serialize
    the deprecated ``PyExtensionType``s (none here). cloudpickle (with ``logging``, ``socket``
    bits and ``typing_extensions``) is ~0.05 s of CPU of every command reading with Arrow; a
    later ``import cloudpickle`` (PyFlink's) gets the real module."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        blocked = "cloudpickle" not in sys.modules
        if blocked:
            sys.modules["cloudpickle"] = None  # type: ignore[assignment]
        try:
            self._loader.exec_module(module)
        finally:
            if blocked and sys.modules.get("cloudpickle", 0) is None:
                del sys.modules["cloudpickle"]


class _WrappedOnce:
    """Finds module ``name`` with its loader wrapped in ``wrap`` (a :class:`_StubbedLoader`
    or a :class:`_PlainPickleLoader`); once, then it leaves ``sys.meta_path``."""

    def __init__(self, name: str, wrap: Any) -> None:
        self.name, self.wrap = name, wrap

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = self.wrap(spec.loader)
        return spec


# ``typer.rich_utils`` is imported for every help and usage error; pyarrow by every command
# reading with Arrow
for _name, _wrap in (("typer.rich_utils", _StubbedLoader), ("pyarrow", _PlainPickleLoader)):
    if _name not in sys.modules:
        sys.meta_path.insert(0, _WrappedOnce(_name, _wrap))

_UNESCAPED_BRACKET = re.compile(r"(?<!\\)\[")
_EXAMPLE = re.compile(r"(?<=\S)\s+(Examples?( \([^)]*\))?:)$")


def literal(text: str | None) -> str | None:
    r"""``text`` with every ``[`` escaped for rich markup (an escaped one is left alone).

    >>> print(literal("ranges as [lo,hi], extra \\[flink]"))
    ranges as \[lo,hi], extra \[flink]
    """
    return None if text is None else _UNESCAPED_BRACKET.sub(r"\\[", text)


def reflow(text: str | None) -> str | None:
    """Docstring paragraphs as single lines (the terminal wraps them); indented blocks, such
    as examples, keep their lines.

    >>> reflow("First line\\nof a paragraph. Example:\\n\\n    cmd --x 1")
    'First line of a paragraph.\\n\\nExample:\\n\\n\\x08    cmd --x 1'
    """
    if text is None:
        return None
    out = []
    for p in inspect.cleandoc(text).split("\n\n"):
        if p.startswith("\b"):
            out.append(p)
        elif p.startswith(" "):
            # typer dedents the help once more; a leading "\b" (dropped when shown, as rich
            # drops control characters) keeps an example block indented as written
            out.append("\n".join("\b" + line for line in p.splitlines()))
        else:  # a closing "Example:" on its own line keeps the example below it indented
            out.append(_EXAMPLE.sub(r"\n\n\1", " ".join(p.split())))
    return "\n\n".join(out)


def _usage_name(name: str, required: bool) -> Callable[[], str]:
    return lambda: name if required else f"[{name}]"


def _literal_help(command: Any) -> None:
    command.help = reflow(command.help)
    for attr in ("help", "short_help", "epilog"):
        setattr(command, attr, literal(getattr(command, attr, None)))
    for param in command.params:
        if getattr(param, "help", None):
            param.help = literal(param.help)  # type: ignore[attr-defined]
        if param.param_type_name == "argument" and param.name:
            if param.metavar is None:
                param.metavar = param.name.upper()
            if hasattr(param, "_usage_display_name"):  # typer writes a required one as {NAME}
                param._usage_display_name = _usage_name(param.metavar, param.required)
    subs = getattr(command, "commands", {})
    if not isinstance(subs, LazyCommands):  # a lazy group's commands: made literal when built
        for sub in subs.values():
            _literal_help(sub)


class LazyCommands(MutableMapping[str, Any]):
    """A group's sub-commands by name, each built the first time it is asked for.

    The names (in the order ``--help`` lists them) and their one-line help come from a small
    table, so listing them costs nothing; :meth:`row` gives the stand-in shown in the
    listing. Any other access (``commands["z"]``, ``.items()``, ``.values()``, which is how
    click resolves a command and how the docs and tests walk the tree) imports the command's
    module and builds it.
    """

    def __init__(self, table: Mapping[str, tuple[str | None, str]],
                 load: Callable[[str, str | None], Any], built: Mapping[str, Any]) -> None:
        self._table = table
        self._load = load
        self._built: dict[str, Any] = dict(built)
        self._rows: dict[str, Any] = {}

    def row(self, name: str) -> Any:
        """What the listing shows for ``name``: the built command, else a stand-in that only
        carries its name and one-line help (nothing imported)."""
        if name in self._built:
            return self._built[name]
        if name not in self._rows:
            if name not in self._table:
                return None
            stand_in = TyperCommand(name=name, help=self._table[name][1])
            _literal_help(stand_in)
            self._rows[name] = stand_in
        return self._rows[name]

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in self._table:
                raise KeyError(name)
            self._built[name] = self._load(name, self._table[name][0])
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._table
        yield from (name for name in self._built if name not in self._table)

    def __len__(self) -> int:
        return len(self._table) + sum(name not in self._table for name in self._built)

    def __contains__(self, name: object) -> bool:
        return name in self._table or name in self._built


class HelpGroup(TyperGroup):
    """A typer group whose parameters, ``--help`` included, are coerced without pydantic
    when their values are plain (:mod:`streamanon.cli.coercion`): every group of the app is
    one, so that ``streamanon z --help`` or ``kafka broker --help`` loads no pydantic."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _plain(option)
        return option


class HelpCommand(TyperCommand):
    """A typer command whose parameters, ``--help`` included, are coerced without pydantic
    when their values are plain, which spares every run loading pydantic
    (:mod:`streamanon.cli.coercion`)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _plain(option)
        return option


def _plain(param: Any) -> None:
    if param is not None:
        from streamanon.cli.coercion import install_one

        install_one(param)


def _cheap(command: Any) -> None:
    """Make every plain typer group and command at and below ``command`` a
    :class:`HelpGroup` or :class:`HelpCommand` (subclasses that only override
    ``get_help_option``), with plain coercion for its parameters."""
    if type(command) is TyperGroup:
        command.__class__ = HelpGroup
    elif type(command) is TyperCommand:
        command.__class__ = HelpCommand
    for param in getattr(command, "params", ()):
        _plain(param)
    subs = getattr(command, "commands", {})
    if not isinstance(subs, LazyCommands):
        for sub in subs.values():
            _cheap(sub)


class LazyHelpGroup(HelpGroup):
    """A command group that imports a sub-command's module only when that command runs or
    its help is asked for, and makes every help text below it literal.

    A subclass names its ``table`` (name -> (module that registers it, or None when it is
    registered here already; the first paragraph of its help)) and ``source``, the typer
    app the modules register on.
    """

    table: ClassVar[Mapping[str, tuple[str | None, str]]] = {}
    source: ClassVar[typer.Typer]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _literal_help(self)  # this group and the commands already built (already imported)
        for command in self.commands.values():
            _cheap(command)
        self.commands = LazyCommands(self.table, self._load, self.commands)
        self._listing = False

    def _load(self, name: str, module: str | None) -> Any:
        if module is not None:
            importlib.import_module(module)
        source = type(self).source
        short = source.pretty_exceptions_short
        for info in source.registered_commands:
            if info.name == name:
                command = typer.main.get_command_from_info(
                    info, pretty_exceptions_short=short,
                    rich_markup_mode=source.rich_markup_mode)
                break
        else:
            for group in source.registered_groups:
                if group.name == name:
                    command = typer.main.get_group_from_info(
                        group, pretty_exceptions_short=short,
                        rich_markup_mode=source.rich_markup_mode,
                        suggest_commands=source.suggest_commands)
                    break
            else:
                raise LookupError(f"{module} registers no command {name!r}")
        _literal_help(command)
        _cheap(command)
        return command

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing:
            return self.commands.row(cmd_name)  # type: ignore[attr-defined]
        return self.commands.get(cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: nothing built

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True  # the listing shows names and one-line helps: import nothing
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


#: The commands of ``streamanon``, in the order its help lists them (a tour: try, check,
#: scale, deploy): the module registering each, and the first paragraph of its help (a test
#: checks it against the command's own).
COMMANDS: dict[str, tuple[str | None, str]] = {
    "demo": ("streamanon.cli.demo", "Run every operator on embedded default data, check each "
             "guarantee, and plot trade-offs."),
    "z": ("streamanon.cli.zanon", "Publish each tuple at its most specific level seen by >= z "
          "users within Δt, else suppress."),
    "castle": ("streamanon.cli.castle", "k_s-anonymize a stream with CASTLE (and l-diversity): "
               "clusters of >= k individuals."),
    "verify": (None, "Independent checkers: recompute a guarantee from input and output, exit 1 "
               "with the first counterexample."),
    "risk": ("streamanon.cli.risk", "Re-identification risk of a released stream: prosecutor, "
             "journalist and marketer risk, sample uniques and smallest class, per window of "
             "rows."),
    "attack": (None, "Attacks on a released stream, as an outside observer with the files "
               "only: how much they learn."),
    "simulate": ("streamanon.cli.dezent", "Simulate a district: centralized vs fully "
                 "decentralized vs deZent on identical readings."),
    "experiment": (None, "Parameter grids: run many configurations (in parallel processes), "
                   "write one CSV row per run with every parameter, and draw the PNG plots of "
                   "each trade-off."),
    "data": ("streamanon.cli.data", "Input data sets: the real files of the papers' "
             "evaluations, turned into streams."),
    "kafka": ("streamanon.cli.kafka", "Try kafka:// pipelines on this machine: a "
              "Kafka-compatible broker (the Tansu binary of the kafka extra), and topic tools to "
              "load a file into a topic and print one."),
    "flink": ("streamanon.cli.flink", "Run the operators as Apache Flink jobs (PyFlink: the "
              "flink extra, `pip install 'streamanon\\[flink]'`, and Java 17): on a local "
              "mini-cluster by default, or submitted to a cluster with `flink run -pym "
              "streamanon.flink ...` (see the Flink guide). Output files are the same as the "
              "pure-Python commands', so `diff` compares the two paths."),
    "pki": ("streamanon.cli.pki", "Certificates for the deZent daemons and sensor nodes (a "
            "private CA whose key is kept apart from the deployment folder)."),
    "cluster": ("streamanon.cli.cluster", "A local deZent deployment (CA, CE, gateways, sensor "
                "nodes replaying a simulated district) as separate processes on loopback."),
    "ce": ("streamanon.cli.ce", "The deZent central entity: checks and stores the tuples the "
           "gateways publish (mutual TLS; SQLite or PostgreSQL)."),
    "gateway": ("streamanon.cli.gateway", "Run one gateway: its authenticated sensor nodes "
                "(TLS, one certificate each, from its registry), ring rounds with its peers "
                "over mutual TLS (no cycle below min_members), published tuples to the CE. "
                "Stops on SIGTERM/Ctrl-C (flushing its outbox) or after clock.last_cycle."),
    "sensors": ("streamanon.cli.sensors", "Sensor nodes: replay a simulated district against "
                "running gateways, each sensor node with its own TLS certificate (see "
                "streamanon.net.intake)."),
}
VERIFY_COMMANDS: dict[str, tuple[str | None, str]] = {
    "z": ("streamanon.cli.verify", "Recompute z-anonymity from INPUT alone and check OUTPUT."),
    "castle": ("streamanon.cli.verify", "Recompute k_s-anonymity and l-diversity of OUTPUT, "
               "and check every released row against the input."),
}
ATTACK_COMMANDS: dict[str, tuple[str | None, str]] = {
    "intersect": ("streamanon.cli.attack", "Intersect each individual's released "
                  "generalizations over time: how far its quasi-identifiers narrow."),
}
EXPERIMENT_COMMANDS: dict[str, tuple[str | None, str]] = {
    "castle": ("streamanon.cli.castle", "The Prink paper's grid (k x δ x l, or a subset) on the "
               "ASHRAE-shaped stream."),
    "dezent": ("streamanon.cli.dezent", "Grid gateways x z x seeds: one CSV row per run, "
               "progress bar, PNG plots."),
    "prink": ("streamanon.cli.prink", "Prink's evaluation: its grid with β = tuples, μ = 100, "
              "ζ = 0, Figs. 3-5 and a CSV."),
}


class _RootGroup(LazyHelpGroup):
    table = COMMANDS

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """``streamanon --version`` (read here: an option of the root group would make every
        command's parsing import typer's value coercion)."""
        if args[:1] == ["--version"]:
            import streamanon

            print(f"streamanon {streamanon.__version__}")
            ctx.exit(0)
        return super().parse_args(ctx, args)


class _VerifyGroup(LazyHelpGroup):
    table = VERIFY_COMMANDS


class _ExperimentGroup(LazyHelpGroup):
    table = EXPERIMENT_COMMANDS


class _AttackGroup(LazyHelpGroup):
    table = ATTACK_COMMANDS


app = typer.Typer(
    name="streamanon",
    cls=_RootGroup,
    help=(
        "Anonymize data streams before anyone untrusted sees them.\n\n"
        "z-anonymity (`z`), decentralized z-anonymity (deZent), and CASTLE k_s-anonymity with "
        "l-diversity. Every command prints a summary that adds up (read = released + "
        "suppressed + rejected); add --json for one JSON object instead of the table. "
        "Rows go to stdout only with -o -, and then nothing else does.\n\n"
        "Exit codes: 0 ok, 1 a check found a problem, 2 usage or input error (nothing "
        "written), 70 internal error, 130 interrupted (143 terminated); a run reading a Kafka "
        "topic stops on Ctrl-C/SIGTERM after checkpointing and exits 0 (130/143 with "
        "--until-end, before the end).\n\n"
        "Start with `streamanon demo`: it writes trace.csv, in.csv and rules.toml for the "
        "README's quick tour. `streamanon --version` prints the version; shell completion: "
        "eval \"$(_STREAMANON_COMPLETE=source_bash streamanon)\" (source_zsh, source_fish)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

verify_app = typer.Typer(
    cls=_VerifyGroup,
    help=COMMANDS["verify"][1],
    no_args_is_help=True,
)
app.add_typer(verify_app, name="verify")

experiment_app = typer.Typer(
    cls=_ExperimentGroup,
    help=COMMANDS["experiment"][1],
    no_args_is_help=True,
)
app.add_typer(experiment_app, name="experiment")

attack_app = typer.Typer(
    cls=_AttackGroup,
    help=COMMANDS["attack"][1],
    no_args_is_help=True,
)
app.add_typer(attack_app, name="attack")

_RootGroup.source = app
_VerifyGroup.source = verify_app
_ExperimentGroup.source = experiment_app
_AttackGroup.source = attack_app
