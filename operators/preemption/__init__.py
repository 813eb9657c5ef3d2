"""Victim selection and nomination: which running pods a pending pod or gang may displace,
and the promise that keeps the freed devices for it. Pure, over `operators.allocator`
and `operators.gangs`.

Modules: victim_gangs (gangs among the victims: whole or within `minCount`),
preemption (one pod's victims, upstream's order), gang_preemption (a gang's victims per
domain), preemption_inputs (the running pods and gangs, read from the tracker),
nomination (the devices promised to a preemptor and its victims, kept as an annotation
on the preemptor pod).
"""
