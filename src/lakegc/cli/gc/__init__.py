"""`lakegc gc`: rules, runs (mark + sweep), deferred sweeps, and what runs found.

Its commands live by what they do: `rules` sets and shows the retention rules, `collecting` runs GC
and changes the namespace (run, sweep, restore, purge), `reading` only reads (explain, simulate, and
the runs' records). The group lists them in the order its help always had."""

from __future__ import annotations

from lakegc.cli.gc import collecting, reading, rules
from lakegc.cli.group import add_commands, new_app

HELP_ORDER = "set-config get-config delete-config run explain simulate sweep restore purge runs show candidates"

app = new_app("Garbage collection: retention rules, runs, sweeps.")
add_commands(app, HELP_ORDER.split(), rules.commands, collecting.commands, reading.commands)
