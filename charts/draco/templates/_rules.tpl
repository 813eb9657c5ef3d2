{{/*
Least-privilege rules of each controller, read off its code (operators/<controller>/):
what its watches list and watch, and exactly the writes it makes. kopf runs draco's
controllers with low-level event handlers only, so it patches nothing of its own.
*/}}

{{/* kopf, under every controller, watches CRDs to notice resources appearing later
(draco's own CRDs installed after draco, say); refused, it logs and retries the listing. */}}
{{- define "draco.rules.kopf" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- end -}}

{{- define "draco.rules.eviction" -}}
# Watches feeding the tracker: devices, claims, pods and taint rules (draco's and upstream's).
- apiGroups: [resource.k8s.io]
  resources: [resourceslices]
  # create: only as a server-side dry run (dryRun=All, nothing is stored) that finds out
  # whether the API server keeps device taints, i.e. whether upstream evicts for them.
  verbs: [list, watch, create]
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims]
  verbs: [list, watch]
- apiGroups: [resource.k8s.io]
  resources: [devicetaintrules]
  verbs: [list, watch]  # upstream's own rule, where served (1.37, or beta gates)
- apiGroups: [resource.draco.dev]
  resources: [devicetaintrules]
  verbs: [list, watch, patch]  # patch: stamps spec.taint.timeAdded
- apiGroups: [resource.draco.dev]
  resources: [devicetaintrules/status]
  verbs: [patch]  # the EvictionInProgress condition
- apiGroups: [""]
  {{- if .Values.controllers.eviction.useEvictionAPI }}
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]  # policy/v1 Eviction, honouring PodDisruptionBudgets
  {{- else }}
  resources: [pods]
  verbs: [list, watch, delete]  # delete: the eviction itself
  {{- end }}
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]  # the DisruptionTarget condition before the eviction
- apiGroups: [""]
  resources: [events]
  verbs: [create]  # in the evicted pods' namespaces, and in "default" about rules
{{- end -}}

{{- define "draco.rules.patches" -}}
- apiGroups: [resource.k8s.io]
  resources: [resourceslices, deviceclasses]
  verbs: [list, watch]
- apiGroups: [resource.draco.dev]
  resources: [resourceslicepatches]
  verbs: [list, watch]
- apiGroups: [resource.draco.dev]
  resources: [resourceslicepatches/status]
  verbs: [patch]  # what each patch touches, its CEL errors
- apiGroups: [""]
  resources: [events]
  verbs: [create]  # about patches, in "default"
{{- end -}}

{{- define "draco.rules.allocator" -}}
- apiGroups: [resource.k8s.io]
  resources: [resourceslices, deviceclasses]
  verbs: [list, watch]
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims]
  verbs: [list, watch, get, update, patch]  # update/patch: the delete-protection finalizer
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims/status]
  verbs: [update, patch]  # allocation and reservedFor as kube-scheduler writes them; a failed binding released
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims/binding]
  verbs: [update, patch]  # 1.36+ (DRAResourceClaimGranularStatusAuthorization): also needed for those two fields
- apiGroups: [resource.k8s.io]
  resources: [devicetaintrules]
  verbs: [list, watch]  # upstream's own rule, where served
- apiGroups: [resource.draco.dev]
  resources: [devicetaintrules]
  verbs: [list, watch]
- apiGroups: [resource.draco.dev]
  resources: [resourceslicepatches]
  verbs: [list, watch]  # admin-set attributes count in the allocator's device view
- apiGroups: [resource.draco.dev]
  resources: [gangs]
  verbs: [get, list, watch]  # groups whose members are allocated jointly; get: a new leader reads a Gang's stored status before its first write
- apiGroups: [resource.draco.dev]
  resources: [gangs/status]
  verbs: [patch]  # members, placed, domain, the Allocated condition
- apiGroups: [scheduling.k8s.io]
  resources: [podgroups]
  verbs: [list, watch]  # upstream's groups, where served (1.37 with GenericWorkload)
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]  # the DracoAllocation condition; DisruptionTarget on preemption victims
{{- if .Values.controllers.allocator.preemption }}
- apiGroups: [""]
  resources: [pods]
  verbs: [patch, delete]  # patch: the nomination annotation on the preemptor; delete: victims
{{- if .Values.controllers.eviction.useEvictionAPI }}
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]  # victims through policy/v1 Eviction
{{- end }}
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list]  # victim selection orders by disruption budgets
- apiGroups: [resource.k8s.io]
  resources: [devicetaintrules]
  verbs: [create, delete]  # NoSchedule fences keeping kube-scheduler off nominated devices (1.37+)
{{- end }}
{{- if .Values.controllers.allocator.admissionCheck }}
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads, admissionchecks, resourceflavors]
  verbs: [get, list, watch]  # Kueue's devices check: the Workloads that name it
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [patch]  # the reservation annotation, written before the check turns Ready
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads/status, admissionchecks/status]
  verbs: [patch]  # the check's state on the Workload; the AdmissionCheck's Active condition
- apiGroups: [resource.k8s.io]
  resources: [resourceclaimtemplates]
  verbs: [get, list, watch]  # a PodSet's claims come from its templates
{{- end }}
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch]  # which nodes reach which devices
- apiGroups: [""]
  resources: [events]
  verbs: [create]  # in the pods' namespaces
{{- end -}}

{{- define "draco.rules.narrowing" -}}
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims]
  verbs: [list, watch]
- apiGroups: [resource.draco.dev]
  resources: [gangs]
  verbs: [list, watch]  # a gang's members are ungated only once the gang is complete
- apiGroups: [scheduling.k8s.io]
  resources: [podgroups]
  verbs: [list, watch]  # upstream's groups, where served
- apiGroups: [""]
  resources: [pods]
  # patch (fast path) or get + update (on a conflict): affinity narrowed and gate removed
  # in one write
  verbs: [list, watch, get, update, patch]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]  # the DracoNarrowing condition
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch, get]  # node taints and cordons; the chosen node's labels
- apiGroups: [""]
  resources: [events]
  verbs: [create]  # in the pods' namespaces
{{- end -}}


{{- define "draco.rules.health" -}}
# Watches feeding the tracker: devices (slice taints), classes and patches (the patched
# view a CEL signal reads), pods (the kubelet's device health), draco's taint rules.
- apiGroups: [resource.k8s.io]
  resources: [resourceslices, deviceclasses]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [resource.draco.dev]
  resources: [resourceslicepatches, devicehealthpolicies]
  verbs: [list, watch]
- apiGroups: [resource.draco.dev]
  resources: [devicehealthpolicies/status]
  verbs: [patch]  # counts, the device list and the Throttled condition
- apiGroups: [resource.draco.dev]
  resources: [devicetaintrules]
  verbs: [list, watch, create, delete]  # one rule per unhealthy device, deleted after recovery
- apiGroups: [""]
  resources: [events]
  verbs: [create]  # about policies, in "default"
{{- end -}}
