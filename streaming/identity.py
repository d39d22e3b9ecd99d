"""Names the pipeline gives itself, which no producer's name may take.

Kept free of imports so that the light modules (the alert push, the Admin API board)
and the heavy ones (incidents, the decoders) can share it.
"""

from __future__ import annotations

# The broker of an incident, a page or a report line that concerns a whole cluster
# (offline partitions, no active controller). A sample naming a broker "*" is refused
# by the decoders (reserved_identity), so a cluster-wide page always means the cluster.
CLUSTER_WIDE = "*"
