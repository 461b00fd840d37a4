"""lakeFS installations: reading their metadata and collecting their namespaces."""
