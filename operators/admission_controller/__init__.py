"""Kueue's AdmissionCheck `resource.draco.dev/devices`, the controller: the kopf shell
(`handlers`) and the loop that answers Workloads and keeps their reservations
(`controller`), over the pure `operators.admission`. Off unless `draco run
--admission-check`.
"""
