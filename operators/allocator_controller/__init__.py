"""The claim allocator controller: it composes the structured allocator, gang placement
and preemption with the one write path (claim status, finalizers, pod reports) and the
holds that keep decided devices taken until the watch shows them allocated.

The only room of the allocator with I/O; the pure rooms below it (`operators.allocator`,
`operators.gangs`, `operators.preemption`) never import it. `handlers.register` wires it
into `draco run --controllers allocator`.
"""
