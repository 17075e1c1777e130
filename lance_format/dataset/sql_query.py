"""``LanceDataset.sql``: pylance's SQL queries over one table, for the part of SQL a scan can
answer.

pylance runs ``ds.sql(...)`` through DataFusion. Here a query is translated into one scan:

    SELECT * | column [AS name] | expression AS name, ...
    FROM <the table's name>          (``dataset`` unless ``table_name`` says otherwise)
    [WHERE condition] [ORDER BY column [ASC|DESC] [NULLS FIRST|LAST], ...]
    [LIMIT n] [OFFSET m]

with the filter dialect's functions and operators in expressions and conditions. Anything else
(aggregates, GROUP BY, joins, DISTINCT, subqueries, unnamed expressions, whose column names are
DataFusion's own) is refused with :class:`UnsupportedFeatureError` rather than answered
differently. Double-quoted names are column names, as in DataFusion (in filters they are strings).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa
import sqlglot
from sqlglot import exp

from lance_format.dataset.scan_options import ColumnOrdering
from lance_format.dataset.sql.translate import LanceFilterDialect
from lance_format.errors import InvalidInputError, UnsupportedFeatureError

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.scanner import LanceScanner

_DEFAULT_TABLE = "dataset"


class _QueryDialect(LanceFilterDialect):
    """The filter dialect with DataFusion's null ordering (nulls last ascending, first descending)."""

    NULL_ORDERING = "nulls_are_large"

# clauses a single scan cannot answer
_REFUSED = {"joins": "joins", "group": "GROUP BY", "having": "HAVING", "distinct": "DISTINCT", "with": "WITH",
            "windows": "WINDOW", "qualify": "QUALIFY"}


class SqlQuery:
    """An executable query (pylance's ``SqlQuery``), made by :meth:`SqlQueryBuilder.build`."""

    def __init__(self, query: LanceScanner) -> None:
        # pylance's parameter name; the planned query here is the scan that answers it
        self._scanner = query

    def to_batch_records(self) -> list[pa.RecordBatch]:
        """Run the query; all result batches."""
        return list(self._scanner.to_batches())

    def to_stream_reader(self) -> pa.RecordBatchReader:
        """Run the query lazily as an Arrow stream."""
        return self._scanner.to_reader()

    def explain_plan(self, verbose: bool = False) -> str:
        """The scan this query runs (this engine's plan)."""
        return self._scanner.explain_plan(verbose)


class SqlStatement(NamedTuple):
    """A query's text and the table it runs on: what :class:`SqlQueryBuilder` is made from (in
    pylance, its core's builder)."""

    dataset: LanceDataset
    sql: str


# a single-quoted string (quotes doubled inside), a backticked name, or a double-quoted name
_QUOTED = re.compile(r"'(?:[^']|'')*'|`[^`]*`|\"((?:[^\"]|\"\")*)\"")


def _backtick_identifiers(sql: str, uri: str) -> str:
    """``sql`` with its double-quoted names (DataFusion's identifiers, as pylance's ``sql`` reads
    them) written with backticks, the quoting this engine's SQL dialect uses for names; double
    quotes inside string literals stay as they are."""
    def rewrite(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)
        name = name.replace('""', '"')
        if "`" in name:
            raise UnsupportedFeatureError(f"the column name {name!r} holds a backtick, which SQL queries here "
                                          "cannot name", table=uri)
        return f"`{name}`"

    return _QUOTED.sub(rewrite, sql)


class SqlQueryBuilder:
    """Options of a query (pylance's ``SqlQueryBuilder``); :meth:`build` checks and plans it."""

    def __init__(self, builder: SqlStatement) -> None:
        # pylance's parameter name
        self._dataset, self._sql = builder
        self._table_name = _DEFAULT_TABLE
        self._options: dict[str, Any] = {}

    def table_name(self, table_name: str) -> SqlQueryBuilder:
        self._table_name = table_name
        return self

    def with_row_id(self, with_row_id: bool = True) -> SqlQueryBuilder:
        self._options["with_row_id"] = with_row_id
        return self

    def with_row_addr(self, with_row_addr: bool = True) -> SqlQueryBuilder:
        self._options["with_row_address"] = with_row_addr
        return self

    def batch_size(self, batch_size: int) -> SqlQueryBuilder:
        self._options["batch_size"] = batch_size
        return self

    def batch_size_bytes(self, batch_size_bytes: int) -> SqlQueryBuilder:
        """About this many bytes a batch at most (with :meth:`batch_size`, whichever limit comes first)."""
        self._options["batch_size_bytes"] = batch_size_bytes
        return self

    def blob_handling(self, blob_handling: str) -> SqlQueryBuilder:
        """How blob columns come back: the scanner's ``blob_handling`` values."""
        self._options["blob_handling"] = blob_handling
        return self

    def build(self) -> SqlQuery:
        """The query, planned as one scan.

        Raises
        ------
        InvalidInputError
            Not a SELECT, a table other than this one, an unknown column or a malformed query.
        UnsupportedFeatureError
            SQL beyond what one scan answers (see the module docstring).
        """
        uri = self._dataset.uri
        try:
            tree = sqlglot.parse_one(_backtick_identifiers(self._sql, uri), read=_QueryDialect)
        except sqlglot.errors.ParseError as error:
            raise InvalidInputError(f"cannot parse SQL query {self._sql!r}: {error}", table=uri) from None
        if not isinstance(tree, exp.Select):
            raise UnsupportedFeatureError(f"only SELECT queries are supported, got {tree.key.upper()}", table=uri)
        for key, clause in _REFUSED.items():
            if tree.args.get(key):
                raise UnsupportedFeatureError(f"{clause} is not supported in SQL queries here (one scan of the "
                                              "table answers a query)", table=uri)
        self._check_from(tree)
        if tree.find(exp.AggFunc) is not None or tree.find(exp.Subquery) is not None:
            raise UnsupportedFeatureError("aggregates and subqueries are not supported in SQL queries here",
                                          table=uri)
        options: dict[str, Any] = dict(self._options)
        options["columns"] = self._columns(tree)
        where = tree.args.get("where")
        if where is not None:
            options["filter"] = where.this.sql(dialect=LanceFilterDialect)
        order = tree.args.get("order")
        if order is not None:
            options["order_by"] = [self._ordering(item) for item in order.expressions]
        for key in ("limit", "offset"):
            bound = tree.args.get(key)
            if bound is not None:
                options[key] = self._count(bound, key)
        return SqlQuery(self._dataset.scanner(**options))

    def _check_from(self, tree: exp.Select) -> None:
        source = tree.args.get("from") or tree.args.get("from_")
        if source is None:
            return  # pylance: no FROM queries the dataset
        table = source.this
        if not isinstance(table, exp.Table) or table.args.get("db") or table.name != self._table_name:
            raise InvalidInputError(f"table {source.this.sql()!r} not found: this query's table is "
                                    f"{self._table_name!r} (set it with table_name())", table=self._dataset.uri)

    def _columns(self, tree: exp.Select) -> Any:
        names = self._dataset.schema.names
        columns: dict[str, str] = {}
        plain: list[str] = []
        for item in tree.expressions:
            if isinstance(item, exp.Star):
                plain += names
                columns.update({n: f"`{n}`" for n in names})
                continue
            alias = item.alias if isinstance(item, exp.Alias) else None
            value = item.this if isinstance(item, exp.Alias) else item
            if isinstance(value, exp.Column) and not value.table:
                name = alias or value.name
                plain.append(name)
                columns[name] = value.sql(dialect=LanceFilterDialect)
                continue
            if not alias:
                raise UnsupportedFeatureError(f"give the expression {value.sql()!r} a name (AS ...): the names "
                                              "DataFusion makes up are not reproduced here", table=self._dataset.uri)
            plain.append(alias)
            columns[alias] = value.sql(dialect=LanceFilterDialect)
        if len(set(plain)) != len(plain):
            raise InvalidInputError(f"duplicate output columns in {self._sql!r}", table=self._dataset.uri)
        if all(columns[n] == f"`{n}`" or columns[n] == n for n in plain) and all(n in names for n in plain):
            return plain  # plain columns: a projection, not expressions
        return {n: columns[n] for n in plain}

    def _ordering(self, item: exp.Expression) -> ColumnOrdering:
        if not isinstance(item, exp.Ordered) or not isinstance(item.this, exp.Column):
            raise UnsupportedFeatureError(f"ORDER BY {item.sql()} is not supported: order by columns",
                                          table=self._dataset.uri)
        return ColumnOrdering(item.this.name, ascending=not item.args.get("desc"),
                              nulls_first=bool(item.args.get("nulls_first")))

    def _count(self, clause: exp.Expression, key: str) -> int:
        value = clause.args.get("expression") or clause.this
        if not isinstance(value, exp.Literal) or value.is_string:
            raise UnsupportedFeatureError(f"{key.upper()} takes a number here, got {clause.sql()}",
                                          table=self._dataset.uri)
        return int(value.this)


__all__ = ["SqlQuery", "SqlQueryBuilder", "SqlStatement"]
