"""The engine every collector shares: list a location on Spark's executors, judge candidates, pass the
deletion guard, delete in recorded rounds, keep one record per run and render its report.

Repository GC (`lakegc.repogc`) and every connector (`lakegc.connectors`) use it the same way; it knows
nothing of repositories, tables or catalogs.
"""
