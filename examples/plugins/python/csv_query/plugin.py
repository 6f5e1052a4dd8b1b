"""csv_query and csv_append: SQL over the CSV files of one directory.

csv_query loads CSV files into an in-memory SQLite database, one table per
file (sales.csv becomes the table sales; numbers stay numbers), runs one
SELECT and returns the rows as CSV. csv_append adds a row to a file. The
data directory is the plugin's only file: `--data DIR` names it, and the
kernel's sandbox grants it (read-only is enough for csv_query).

    args: [--data, data]

agentkernel_plugin is the Python SDK (sdk/python), in this directory so that
the plugin's lock pins it with the plugin.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import os
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from datetime import datetime

from agentkernel_plugin import CallContext, Code, SideEffect, Tool, ToolError, serve, tool

MAX_ROWS = 1_000_000

# Queries running now, in their threads (the tests watch it go back to 0).
_running = 0
_running_lock = threading.Lock()


def running_queries() -> int:
    """How many queries are running now."""
    with _running_lock:
        return _running


@dataclass
class QueryArgs:
    sql: str
    files: list[str] = field(default_factory=list)
    max_rows: int = 100


@dataclass
class AppendArgs:
    file: str
    row: dict[str, object]


def tools(data: str) -> list[Tool]:
    """The plugin's tools over the data directory data."""

    @tool(
        name="csv_query",
        tier="read_only",
        tags=["data"],
        schema={
            "type": "object",
            "properties": {
                "sql": {"type": "string", "description": "One SQLite SELECT over the tables, e.g. SELECT region, sum(units) FROM sales GROUP BY region."},
                "files": {"type": "array", "items": {"type": "string"}, "description": "CSV files of the data directory to load (default: all); each is the table named after it."},
                "max_rows": {"type": "integer", "minimum": 1, "maximum": MAX_ROWS, "description": "Rows to return at most (default 100)."},
            },
            "required": ["sql"],
            "additionalProperties": False,
        },
    )
    async def csv_query(args: QueryArgs, ctx: CallContext) -> str:
        """Runs an SQL query (SQLite) over CSV files and returns the rows as
        CSV. Each file is a table named after it: sales.csv is sales."""
        return await asyncio.to_thread(_query, data, args, ctx)

    @tool(
        name="csv_append",
        tier="side_effecting",
        tags=["data", "write"],
        schema={
            "type": "object",
            "properties": {
                "file": {"type": "string", "description": "A CSV file of the data directory."},
                "row": {"type": "object", "description": "The new row: column name to value. Missing columns are left empty."},
            },
            "required": ["file", "row"],
            "additionalProperties": False,
        },
    )
    async def csv_append(args: AppendArgs, ctx: CallContext) -> str:
        """Appends one row to a CSV file of the data directory."""
        path = _inside(data, args.file)
        header = _header(path)
        unknown = sorted(set(args.row) - set(header))
        if unknown:
            raise ToolError(Code.INVALID_ARGS, f"{args.file} has no column {', '.join(unknown)} (its columns: {', '.join(header)})")
        line = _csv_line([args.row.get(c, "") for c in header])
        with open(path, "a+", newline="") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(f.tell() - 1)
                if f.read(1) != "\n":
                    line = "\n" + line
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        return f"appended 1 row to {args.file}"

    @csv_append.check_side_effect
    def _appended(args: AppendArgs, since: datetime) -> tuple[SideEffect, str]:
        path = _inside(data, args.file)
        try:
            mtime = os.stat(path).st_mtime
            header = _header(path)
            with open(path, newline="") as f:
                last = f.read().splitlines()[-1] + "\r\n"
        except (OSError, IndexError, ToolError):
            return SideEffect.UNKNOWN, ""
        row = _csv_line([args.row.get(c, "") for c in header])
        if mtime < since.timestamp():
            return SideEffect.NOT_RUN, f"{args.file} is unchanged since the round started"
        if last == row:
            return SideEffect.COMPLETED, f"the last row of {args.file} is the row"
        return SideEffect.UNKNOWN, ""

    return [csv_query, csv_append]


def _query(data: str, args: QueryArgs, ctx: CallContext) -> str:
    global _running
    with _running_lock:
        _running += 1
    try:
        return _run_query(data, args, ctx)
    finally:
        with _running_lock:
            _running -= 1


def _run_query(data: str, args: QueryArgs, ctx: CallContext) -> str:
    conn = sqlite3.connect(":memory:")
    # The query runs in this thread, which the call's end cannot cancel:
    # SQLite asks every 10000 instructions whether to go on.
    conn.set_progress_handler(lambda: ctx.cancelled, 10_000)
    try:
        files = args.files or sorted(f for f in os.listdir(data) if f.endswith(".csv"))
        for name in files:
            n = _load(conn, _inside(data, name), _table(name))
            ctx.progress(f"loaded {name}: {n} rows")
        conn.set_authorizer(_no_attach)
        try:
            cur = conn.execute(args.sql)
        except sqlite3.Error as e:
            raise ToolError(Code.INVALID_ARGS, f"the query failed: {e}") from e
        if cur.description is None:
            raise ToolError(Code.INVALID_ARGS, "the query returned no rows: csv_query runs SELECTs")
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(d[0] for d in cur.description)
        rows = cur.fetchmany(args.max_rows + 1)
        w.writerows(rows[: args.max_rows])
        if len(rows) > args.max_rows:
            out.write(f"[more rows than max_rows={args.max_rows}: raise it or narrow the query]\n")
        return out.getvalue()
    except sqlite3.OperationalError as e:
        if ctx.cancelled:
            raise ToolError(ctx.reason or Code.CANCELLED, "the query was stopped") from e
        raise ToolError(Code.INVALID_ARGS, f"the query failed: {e}") from e
    finally:
        conn.close()


def _load(conn: sqlite3.Connection, path: str, table: str) -> int:
    try:
        f = open(path, newline="")
    except FileNotFoundError:
        raise ToolError(Code.NOT_FOUND, f"no file {os.path.basename(path)} in the data directory") from None
    with f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise ToolError(Code.INVALID_ARGS, f"{os.path.basename(path)} is empty")
        cols = ", ".join(_quote(c) for c in header)
        conn.execute(f"CREATE TABLE {_quote(table)} ({cols})")
        n = 0
        marks = ", ".join("?" for _ in header)
        for row in reader:
            conn.execute(f"INSERT INTO {_quote(table)} VALUES ({marks})", [_value(v) for v in (row + [""] * len(header))[: len(header)]])
            n += 1
        return n


def _value(v: str) -> object:
    """A CSV field as SQLite should see it: numbers as numbers."""
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def _no_attach(action: int, *_args: object) -> int:
    """The query reads the loaded tables only: no ATTACH of other files."""
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK


def _header(path: str) -> list[str]:
    try:
        with open(path, newline="") as f:
            header = next(csv.reader(f), None)
    except FileNotFoundError:
        raise ToolError(Code.NOT_FOUND, f"no file {os.path.basename(path)} in the data directory") from None
    if not header:
        raise ToolError(Code.INVALID_ARGS, f"{os.path.basename(path)} has no header")
    return header


def _csv_line(values: list[object]) -> str:
    out = io.StringIO()
    csv.writer(out).writerow(values)
    return out.getvalue()


def _table(name: str) -> str:
    return re.sub(r"\W", "_", os.path.splitext(os.path.basename(name))[0])


def _quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def _inside(data: str, name: str) -> str:
    """The file name of the data directory, refusing paths that leave it."""
    if not name or os.path.isabs(name) or os.path.normpath(name).startswith(".."):
        raise ToolError(Code.INVALID_ARGS, f"{name!r} is not a file of the data directory")
    return os.path.join(data, os.path.normpath(name))


def main() -> None:
    p = argparse.ArgumentParser(description="agentkernel plugin: SQL over CSV files")
    p.add_argument("--data", required=True, help="the directory of the CSV files")
    a = p.parse_args()
    serve(tools(os.path.abspath(a.data)))


if __name__ == "__main__":
    main()
