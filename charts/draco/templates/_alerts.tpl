{{/*
draco's alerts: the one source of the PrometheusRule (prometheusrule.yaml) and of the plain
Prometheus rules file hack/render-manifests writes from it (manifests/prometheus/).

Every expr is `<value> <comparison> <number>`: the value is what the alert measures (it
returns series whether the alert fires or not), the number is the threshold. The
monitoring test relies on this form to check that each value returns series.
Each alert's runbook is the `##` section of docs/operations/alerts.md named after it.
*/}}
{{- define "draco.alertGroups" -}}
{{- $v := .Values.prometheusRule -}}
{{- $runbook := $v.runbookBaseURL -}}
groups:
- name: draco
  rules:
  - alert: DracoNoLeader
    expr: (sum by (namespace) (draco_leader) or on() vector(0)) < 1
    for: {{ $v.noLeader.for }}
    labels:
      severity: critical
      {{- with $v.alertLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    annotations:
      summary: No draco replica holds the leader Lease, so no controller acts.
      description: {{ `No draco process in namespace {{ $labels.namespace }} reports draco_leader 1: DeviceTaintRules evict nothing, gated pods get no devices, health policies taint nothing.` | quote }}
      runbook_url: {{ printf "%s#draconoleader" $runbook | quote }}
  - alert: DracoControllerNotReady
    expr: max by (namespace, controller) (draco_controller_ready) < 1
    for: {{ $v.controllerNotReady.for }}
    labels:
      severity: critical
      {{- with $v.alertLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    annotations:
      summary: A draco controller on the leader is not ready.
      description: {{ `draco's {{ $labels.controller }} controller (namespace {{ $labels.namespace }}) has not finished its initial sync, or a loop of it is not running (crashed and restarting).` | quote }}
      runbook_url: {{ printf "%s#dracocontrollernotready" $runbook | quote }}
  - alert: DracoEvictionStuck
    expr: max by (namespace, rule) (draco_device_taint_rule_eviction_in_progress) > 0
    for: {{ $v.evictionStuck.for }}
    labels:
      severity: warning
      {{- with $v.alertLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    annotations:
      summary: A DeviceTaintRule has had pods pending eviction for too long.
      description: {{ printf "DeviceTaintRule {{ $labels.rule }} has been EvictionInProgress=True for more than %s: pods on its devices are still running." $v.evictionStuck.for | quote }}
      runbook_url: {{ printf "%s#dracoevictionstuck" $runbook | quote }}
  - alert: DracoGatedPodsWaiting
    expr: max by (namespace, reason) (draco_gated_pods_oldest_wait_seconds{reason!="WaitingForGate"}) > {{ $v.gatedPodsWaiting.seconds }}
    for: {{ $v.gatedPodsWaiting.for }}
    labels:
      severity: warning
      {{- with $v.alertLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    annotations:
      summary: Pods have waited at draco's scheduling gate past the threshold.
      description: {{ `The oldest pod gated with reason {{ $labels.reason }} was created {{ $value | humanizeDuration }} ago and still carries resource.draco.dev/allocation.` | quote }}
      runbook_url: {{ printf "%s#dracogatedpodswaiting" $runbook | quote }}
  - alert: DracoHealthPolicyThrottled
    expr: max by (namespace, policy) (draco_health_policy_throttled) > 0
    for: {{ $v.healthPolicyThrottled.for }}
    labels:
      severity: warning
      {{- with $v.alertLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    annotations:
      summary: A DeviceHealthPolicy holds unhealthy devices back from being tainted.
      description: {{ `DeviceHealthPolicy {{ $labels.policy }} has devices with a signal that its maxUnavailable does not let it taint: pods may still be placed on them.` | quote }}
      runbook_url: {{ printf "%s#dracohealthpolicythrottled" $runbook | quote }}
  - alert: DracoAPIErrorsRising
    expr: sum by (namespace) (rate(draco_api_request_errors_total[5m])) > {{ $v.apiErrors.perSecond }}
    for: {{ $v.apiErrors.for }}
    labels:
      severity: warning
      {{- with $v.alertLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    annotations:
      summary: draco's requests to the Kubernetes API fail.
      description: {{ `draco in namespace {{ $labels.namespace }} sees {{ $value | humanize }} failed API requests a second (draco_api_request_errors_total by verb and reason says which).` | quote }}
      runbook_url: {{ printf "%s#dracoapierrorsrising" $runbook | quote }}
{{- end -}}
