"""Which commits stay: lakeFS's retention rules, Nessie-style cutoffs, and the walk over the commit graph that
turns them into the set of active commits. Pure functions over plain data: GC, the sweep's fence and the
repository's writers all decide with the same code."""
