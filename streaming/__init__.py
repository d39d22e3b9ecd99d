"""kafka-health: Kafka fleet health signals from broker metrics on Kafka topics."""

import os

# pyarrow's allocator (mimalloc) keeps freed pages for later reuse by default; with a
# batch's Arrow tables coming and going in the driver and in every Python worker, that
# is memory held for nothing: purging them at once lowers the process tree's peak RSS
# under load (the system allocator does too, but is slower).
# Set here, before pyarrow loads, and inherited by Spark's JVM and its Python workers.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "0")
