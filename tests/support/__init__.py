"""What the tests stand on: servers started on loopback (PostgreSQL, an S3-API server behind a
fault-injecting proxy), a reference model of GC written from the spec, and a writer process that
hammers a repository through the Python API."""
