"""Reports for people on call: a static HTML page of the last hours and headroom in a terminal.

Entry points (wired into the CLI by streaming/cli/):

* ``write_report(delta_root, out_dir, hours=6.0, cluster=None, now=None) -> Path``
* ``headroom_table(delta_root, cluster=None) -> DataFrame`` and ``format_headroom_table(df) -> str``
* ``write_headroom_chart(delta_root, path, cluster=None) -> Path``

Nothing here imports pyspark: reports read the Delta tables with delta-rs.
"""

from streaming.report.headroom_view import format_headroom_table, headroom_table, write_headroom_chart
from streaming.report.html import write_report

__all__ = ["format_headroom_table", "headroom_table", "write_headroom_chart", "write_report"]
