"""The one API write path of draco's controllers (and the tracker feed).

    client.py     KubeClient: aiohttp, kubeconfig or service-account credentials,
                  token-bucket rate limit, retries on connection errors, 429 and 5xx
    shared.py     shared_client(): a client whose requests count against the one rate
                  limit of the process, however many controllers write
    conflicts.py  read_modify_write(): resourceVersion precondition, 409 -> read again
    events.py     EventRecorder: core/v1 Events, deduplicated
    conditions.py metav1.Condition bookkeeping (transition_time, merge_condition)
    feed.py       kopf watch streams -> the shared tracker, initial-sync gate
    list_watch.py ListWatch: draco's own list+watch (msgspec) of pods, claims and slices
    pod_watch.py  PodFeed: draco's own list+watch of Pods; a pod that uses no claim and
                  has no scheduling gate is probed (msgspec) and dropped, never kept
    supervision.py guarded() steps and the Supervisor of controller loops: errors logged,
                  counted (draco_controller_errors_total{controller,step}), loops
                  restarted; Supervisor.is_alive() for readiness
"""
