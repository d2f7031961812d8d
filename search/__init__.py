"""Running searches, in three layers (each a subpackage; this namespace imports none):

- ``orthotune.search.training``: data loading and the one training loop (node and graph tasks);
- ``orthotune.search.store``: the Parquet store (schema and storage);
- ``orthotune.search.tune``: the Ray Tune glue (trainable, searchers, schedulers, launch).
"""
