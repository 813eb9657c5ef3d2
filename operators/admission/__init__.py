"""Kueue's AdmissionCheck `resource.draco.dev/devices`, the pure part: a Workload's
PodSets turned into a gang (`members`), searched jointly over the device view
(`decide`), and the reservation that keeps the devices found until the pods come
(`reservation`). Reads plain dicts of `kueue.x-k8s.io/v1beta2` objects (`workload`);
no I/O, no kopf: the controller (`operators.admission_controller`) and
`draco allocate --workload` both sit on top of it.
"""
