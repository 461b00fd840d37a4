from lakegc.cli.main import run

run()
