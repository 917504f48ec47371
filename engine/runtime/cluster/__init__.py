"""Controller mode (``helmdeck controller``): the API server's Package objects as packages, their status, Events
and finalizers written back, the operator's actions requested by annotation, and the shards (a static shard's
selector and Lease, ``--shards auto``'s members and placement, the hand-over of packages between replicas)."""
