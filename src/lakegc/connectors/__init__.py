"""GC for lakes whose truth lives in a catalog rather than in our repository: Iceberg tables
(`iceberg`) and an IOx-style `parquet_file` table (`catalog`). They share the repository GC's
machinery: runs with ids and states, listing and deleting on Spark executors, Parquet outputs and
reports (`runs`)."""
