"""The csv_query plugin's tests, with the SDK's harness. Outside the
plugin's directory, so that its lock does not pin them.

    cd examples/plugins/python && /usr/bin/python3 -m unittest -v
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import unittest
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "csv_query"))

from agentkernel_plugin import SideEffect  # noqa: E402
from agentkernel_plugin.testing import Harness  # noqa: E402
from plugin import running_queries, tools  # noqa: E402

SALES = os.path.join(HERE, "..", "data", "sales.csv")


class TestCSVQuery(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        self.data = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.data)
        shutil.copy2(SALES, self.data)  # keeps its old mtime

    async def test_query(self):
        async with Harness(tools(self.data)) as h:
            out = await h.call("csv_query", {"sql": "SELECT region, sum(units) AS units FROM sales GROUP BY region ORDER BY units DESC"})
            self.assertEqual(out.content, "region,units\nnorth,24\neast,20\nsouth,12\n")
            self.assertEqual(out.progress, ["loaded sales.csv: 6 rows"])

    async def test_numbers_stay_numbers_and_rows_are_capped(self):
        async with Harness(tools(self.data)) as h:
            out = await h.call("csv_query", {"sql": "SELECT round(sum(units * price), 2) FROM sales"})
            self.assertEqual(out.content.splitlines()[1], "277.2")
            out = await h.call("csv_query", {"sql": "SELECT date FROM sales", "max_rows": 2})
            self.assertEqual(out.content.splitlines()[1:], ["2026-01-05", "2026-01-05", "[more rows than max_rows=2: raise it or narrow the query]"])

    async def test_errors(self):
        async with Harness(tools(self.data)) as h:
            cases = [
                ({"sql": "SELECT 1", "files": ["nope.csv"]}, "not_found"),
                ({"sql": "SELEKT 1"}, "invalid_args"),
                ({"sql": "SELECT 1", "files": ["../sales.csv"]}, "invalid_args"),
                ({"sql": f"ATTACH DATABASE '{self.data}/x.db' AS x"}, "invalid_args"),
            ]
            for args, code in cases:
                with self.subTest(args=args):
                    self.assertEqual((await h.call("csv_query", args)).code, code)
            self.assertFalse(os.path.exists(os.path.join(self.data, "x.db")))

    async def test_cancel_stops_the_query(self):
        forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
        async with Harness(tools(self.data)) as h:
            cancel = asyncio.Event()
            call = asyncio.create_task(h.call("csv_query", {"sql": forever, "files": ["sales.csv"]}, cancel=cancel))
            await asyncio.sleep(0.2)
            cancel.set()
            self.assertEqual((await call).code, "cancelled")
            out = await h.call("csv_query", {"sql": forever, "files": ["sales.csv"]}, timeout=0.5)
            self.assertEqual(out.code, "timeout")
        # Both queries ended in their threads: SQLite stopped them.
        for _ in range(500):
            if running_queries() == 0:
                break
            await asyncio.sleep(0.02)
        self.assertEqual(running_queries(), 0)

    async def test_append_and_its_check(self):
        async with Harness(tools(self.data)) as h:
            since = datetime.now(timezone.utc) - timedelta(seconds=1)
            args = {"file": "sales.csv", "row": {"date": "2026-01-09", "region": "west", "units": 1, "price": 2.5}}
            self.assertEqual((await h.check_side_effect("csv_append", args, since))[0], SideEffect.NOT_RUN)
            self.assertEqual((await h.call("csv_append", args)).content, "appended 1 row to sales.csv")
            self.assertEqual((await h.check_side_effect("csv_append", args, since))[0], SideEffect.COMPLETED)
            out = await h.call("csv_query", {"sql": "SELECT count(*), max(region) FROM sales"})
            self.assertEqual(out.content.splitlines()[1], "7,west")
            self.assertEqual((await h.call("csv_append", {"file": "sales.csv", "row": {"colour": "red"}})).code, "invalid_args")


if __name__ == "__main__":
    unittest.main()
