"""Row filters for the Delta sinks, built once and rendered for either engine.

delta-rs reads through pyarrow datasets, whose filters are pyarrow Expressions; delta-spark
reads through Spark DataFrames, whose filters are Columns. A pyarrow Expression cannot be
taken apart again, so the readers' filters are built here, with the names pyarrow's own
builders have (`field("ts") >= t`, `.isin`, `.is_null`, `&`, `|`, `~`), and each sink
renders them its own way. Values stay values in both renderings (Arrow scalars, Spark
literals), never text spliced into a query, so a cluster name with quotes is harmless.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as ds

if TYPE_CHECKING:
    from pyspark.sql import Column


def _plain(value: Any) -> Any:
    """A Python value for a Spark literal (an Arrow scalar's own value)."""
    return value.as_py() if isinstance(value, pa.Scalar) else value


class Predicate:
    """One filter in both renderings: `arrow` (a pyarrow Expression, built at once) and
    `spark()` (a Column, built on demand, so a process without a Spark session never
    imports pyspark's functions for it)."""

    __slots__ = ("_spark", "arrow")

    def __init__(self, arrow: ds.Expression, spark: Callable[[], Column]) -> None:
        self.arrow = arrow
        self._spark = spark

    def spark(self) -> Column:
        return self._spark()

    def __and__(self, other: Predicate) -> Predicate:
        return Predicate(self.arrow & other.arrow, lambda: self.spark() & other.spark())

    def __or__(self, other: Predicate) -> Predicate:
        return Predicate(self.arrow | other.arrow, lambda: self.spark() | other.spark())

    def __invert__(self) -> Predicate:
        return Predicate(~self.arrow, lambda: ~self.spark())

    def __repr__(self) -> str:
        return f"Predicate({self.arrow})"


def _col(name: str) -> Column:
    from pyspark.sql import functions as F  # noqa: N812 - pyspark's own alias

    return F.col(name)


def _lit(value: Any) -> Column:
    from pyspark.sql import functions as F  # noqa: N812

    return F.lit(_plain(value))


class Field:
    """A column to compare; `field(name)` builds one."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _compare(self, op: Callable[[Any, Any], Any], value: Any) -> Predicate:
        return Predicate(op(ds.field(self.name), value),
                         lambda: op(_col(self.name), _lit(value)))

    def __eq__(self, value: object) -> Predicate:  # type: ignore[override]
        return self._compare(operator.eq, value)

    def __ne__(self, value: object) -> Predicate:  # type: ignore[override]
        return self._compare(operator.ne, value)

    def __lt__(self, value: Any) -> Predicate:
        return self._compare(operator.lt, value)

    def __le__(self, value: Any) -> Predicate:
        return self._compare(operator.le, value)

    def __gt__(self, value: Any) -> Predicate:
        return self._compare(operator.gt, value)

    def __ge__(self, value: Any) -> Predicate:
        return self._compare(operator.ge, value)

    __hash__ = None  # type: ignore[assignment]

    def isin(self, values: Iterable[Any]) -> Predicate:
        values = [_plain(v) for v in values]
        return Predicate(ds.field(self.name).isin(values),
                         lambda: _col(self.name).isin(values))

    def is_null(self) -> Predicate:
        return Predicate(ds.field(self.name).is_null(), lambda: _col(self.name).isNull())


def field(name: str) -> Field:
    return Field(name)


def always(value: bool) -> Predicate:
    """A filter every row passes (True) or none does (False)."""
    return Predicate(ds.scalar(value), lambda: _lit(value))


def any_of(predicates: Iterable[Predicate]) -> Predicate:
    """OR of the predicates; none passes when there are none."""
    listed = list(predicates)
    return functools.reduce(operator.or_, listed) if listed else always(False)


Filter = Predicate | ds.Expression  # delta-rs also takes pyarrow's own (the reports')


def arrow_filter(condition: Filter | None) -> ds.Expression | None:
    """The pyarrow rendering (a pyarrow Expression passes as it is)."""
    return condition.arrow if isinstance(condition, Predicate) else condition


def spark_filter(condition: Filter) -> Column:
    """The Spark rendering; a pyarrow Expression has none (it cannot be taken apart)."""
    if not isinstance(condition, Predicate):
        raise TypeError(f"delta-spark filters are streaming.sinks.predicates Predicates, not "
                        f"{type(condition).__name__} ({condition})")
    return condition.spark()
