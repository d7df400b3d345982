"""CASTLE's public record types: an input tuple (:class:`CastleRow`) and a released one
(:class:`Released`), and the identity of an id or sensitive value (:func:`canonical`).

Apart from the cluster engine (:mod:`streamanon.castle.cluster`), so that readers and writers
(:mod:`streamanon.io`, the Flink job) name the records without the engine's code.

>>> CastleRow({"u": "a", "age": 30}, line=2) == CastleRow({"u": "a", "age": 30})
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class CastleRow:
    """One input tuple: its columns, and where it came from (for messages and timing).

    ``t`` is the arrival time in seconds, used only by the ``max_delay`` bound; when absent it
    is read from the rules' ``time`` column.
    """

    values: Mapping[str, Any]
    line: int | None = field(default=None, compare=False)
    t: float | None = None


@dataclass(slots=True)
class Released:
    """One output tuple: the input's columns with quasi-identifiers generalized.

    ``cluster`` numbers the released equivalence group (-1 for a suppressed tuple written by
    the ``null``/``generalize`` strategies); ``loss`` is that group's information loss.
    """

    values: dict[str, Any]
    loss: float
    cluster: int
    line: int | None = None


class ReleasedFields(Released):
    """A :class:`Released` row of a block given as fields (``process_block`` with
    ``header``): its ``values`` are built on first use from its class's ``template`` and the
    row's ``fields``, so that a writer that reads templates (the command's CSV writer) writes
    the row without building a dict for it. Equal to the :class:`Released` of the same values.

    ``template``: the class's columns as a dict in the header's order with its values in
    place (the columns it does not generalize still ``None``, then the columns only it has),
    and ``slots``: per header column, its field's index when the row gives the value, else -1.

    >>> r = ReleasedFields.of({"id": None, "age": "[30-40]"}, (0, -1), ("p1", 33), 0.2, 7, 2)
    >>> r.values, r == Released({"id": "p1", "age": "[30-40]"}, 0.2, 7, 2)
    ({'id': 'p1', 'age': '[30-40]'}, True)
    """

    __slots__ = ("fields", "slots", "template")

    template: dict[str, Any]
    slots: tuple[int, ...]
    fields: tuple[Any, ...]

    @classmethod
    def of(cls, template: dict[str, Any], slots: tuple[int, ...], fields: tuple[Any, ...],
           loss: float, cluster: int, line: int | None) -> ReleasedFields:
        """The released row ``fields`` of a class (its ``template`` and ``slots``).

        Args:
            template: the class's columns, its values in place (not copied: shared).
            slots: per header column, the index of its field in ``fields``, or -1.
            fields: the row's fields in the header's order.
            loss: the class's information loss.
            cluster: the class's number.
            line: the row's input line.
        """
        self = object.__new__(cls)
        self.template, self.slots, self.fields = template, slots, fields
        self.loss, self.cluster, self.line = loss, cluster, line
        return self

    @property  # type: ignore[override]
    def values(self) -> dict[str, Any]:
        try:
            return _VALUES_SLOT.__get__(self, Released)  # type: ignore[no-any-return]
        except AttributeError:
            pass
        values = self.template.copy()
        fields = self.fields
        for name, at in zip(values, self.slots, strict=False):
            if at >= 0:
                values[name] = fields[at]
        _VALUES_SLOT.__set__(self, values)
        return values

    @values.setter
    def values(self, values: dict[str, Any]) -> None:
        _VALUES_SLOT.__set__(self, values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Released):
            return NotImplemented
        return (self.values, self.loss, self.cluster, self.line) == (
            other.values, other.loss, other.cluster, other.line)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # as a Released: what it is, whatever holds its values
        return (f"Released(values={self.values!r}, loss={self.loss!r}, "
                f"cluster={self.cluster!r}, line={self.line!r})")


#: the storage of :attr:`Released.values` (a slot), which :class:`ReleasedFields` fills late
_VALUES_SLOT = Released.__dict__["values"]


def canonical(value: Any) -> str:
    """The identity of an id or sensitive value: numbers by value, the rest by text.

    >>> canonical(5), canonical(5.0), canonical("5"), canonical(True)
    ('5.0', '5.0', '5', 'true')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)
