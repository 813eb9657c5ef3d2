"""The chaos run: a seeded stream of gangs, single pods, preemptors, NoExecute rules and
health signals fed to two `draco run --leader-elect` replicas on a real cluster while
the leader is SIGKILLed and the kube-apiserver restarted; invariants checked from the
API. `workload` and `invariants` are pure (unit-tested on hand-made states);
`harness` does the I/O."""
