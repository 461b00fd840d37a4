"""`spark-submit lakegc_submit.py ARGS...` runs `lakegc ARGS...` inside the submitted application."""

from lakegc.cli.main import run

run()
