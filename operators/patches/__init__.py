"""ResourceSlicePatch reporter (KEP-5027): Events and status for each patch.

The merging itself is a tracker overlay (`operators.tracker.slice_patches`), because
every consumer of the device view needs it and the layers only import downwards.

    report.py     pure decisions: status, the `Faulty` condition, which Events to post
    reporter.py   the coalescing loop from tracker changes to writes (transport-free)
    handlers.py   kopf wiring: register(registry, tracker, settings)
    kube_writer.py the API writes, through operators.kube (the one write path: shared
                   rate limit, retries, Events, conditions)
"""
