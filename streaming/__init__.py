"""kafka-health: Kafka fleet health signals from broker metrics on Kafka topics."""

import os

# pyarrow's allocator (mimalloc) returns freed pages to the system after a delay (10 ms by
# default). A batch's Arrow tables come and go in the driver and in every Python worker
# once or more a second, so pages returned at once (0) are faulted back in by the next
# batch: a page fault per 4 KiB of every large table, most of the cost of a batch's sorts
# and group-bys in a catch-up. Kept a second, the pages of one batch serve the next; an
# idle process still returns them within a second.
# Set here, before pyarrow loads, and inherited by Spark's JVM and its Python workers.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "1000")
