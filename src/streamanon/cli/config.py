"""``--config FILE.toml``: a command's long options from a TOML file.

Its keys are the command's long option names without the dashes (``delta-t`` or
``delta_t``); a value given on the command line wins over the file's. An unknown key, a key
given twice (``delta-t`` and ``delta_t``) or a file that is not TOML is refused (exit 2)
with the file and the key named. The file is read by an eager callback that fills click's
``default_map`` before any other option is parsed, so that a required option (``--z``) may
come from the file (typer's Context and Parameter, duck-typed: typer vendors click).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def _option_names(command: Any) -> dict[str, Any]:
    """Each long option name of ``command`` (with ``-`` and with ``_``) -> its parameter."""
    names: dict[str, Any] = {}
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option" or param.name in (None,
                                                                             "config"):
            continue
        for opt in (*param.opts, *param.secondary_opts):
            if opt.startswith("--"):
                names[opt[2:]] = param
                names[opt[2:].replace("-", "_")] = param
    return names


def read_config(ctx: Any, path: Path) -> dict[str, Any]:
    """The ``default_map`` of ``ctx``'s command from the TOML file ``path`` (exit 2 when it
    cannot be used)."""
    import tomllib

    from streamanon.cli.common import fail

    try:
        with open(path, "rb") as fh:
            table = tomllib.load(fh)
    except OSError as exc:
        fail(f"--config {path}: {exc.strerror}")
    except tomllib.TOMLDecodeError as exc:
        fail(f"--config {path}: not a TOML file ({exc})")
    names = _option_names(ctx.command)
    out: dict[str, Any] = {}
    for key, value in table.items():
        param = names.get(key)
        if param is None:
            fail(f"--config {path}: unknown key {key!r} (not an option of this command; "
                 f"keys are the long option names, e.g. {next(iter(names), 'z')!r})")
        if param.name in out:
            fail(f"--config {path}: key {key!r} sets an option given twice in the file")
        if isinstance(value, dict):
            fail(f"--config {path}: key {key!r} is a table, not an option's value")
        if getattr(param, "multiple", False) and not isinstance(value, list):
            value = [value]  # a repeatable option: one value or a list
        out[param.name] = value
    return out


def _load(ctx: Any, _param: Any, value: Path | None) -> Path | None:
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), **read_config(ctx, value)}
    return value


CONFIG_HELP = ("A TOML file of this command's long options (keys: the option names without "
               "the dashes, - or _: delta-t = 3600, rules = \"r.toml\"); options given on the "
               "command line win; an unknown key is refused.")

config_option: Any = typer.Option(None, "--config", metavar="FILE.toml", is_eager=True,
                                  callback=_load, help=CONFIG_HELP)
