{{/* The chart name, overridable. */}}
{{- define "draco.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object name: the release name, plus the chart name unless it is in it. */}}
{{- define "draco.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "draco.selectorLabels" -}}
app.kubernetes.io/name: {{ include "draco.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "draco.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "draco.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: draco
{{- end -}}

{{- define "draco.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "draco.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "draco.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The enabled controllers, comma-separated, in draco's order. */}}
{{- define "draco.controllers" -}}
{{- $on := list -}}
{{- range $name := list "eviction" "patches" "allocator" "narrowing" "health" -}}
{{- if (get $.Values.controllers $name).enabled -}}
{{- $on = append $on $name -}}
{{- end -}}
{{- end -}}
{{- join "," $on -}}
{{- end -}}

{{- define "draco.webhookName" -}}
{{- printf "%s-webhook" (include "draco.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The gate webhook's own Deployment: a selector of its own (the controllers' Deployment
keeps its selector, which is immutable), so neither Deployment, Service or PDB picks up
the other's pods. */}}
{{- define "draco.webhookSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-webhook" (include "draco.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "draco.webhookLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "draco.webhookSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: draco
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "draco.webhookServiceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- $name := default (include "draco.webhookName" .) .Values.webhook.serviceAccountName -}}
{{- if eq $name (include "draco.serviceAccountName" .) -}}
{{- fail "webhook.serviceAccountName must differ from the controllers' ServiceAccount (both are created)" -}}
{{- end -}}
{{- $name -}}
{{- else -}}
{{- required "webhook.serviceAccountName is required when serviceAccount.create is false" .Values.webhook.serviceAccountName -}}
{{- end -}}
{{- end -}}

{{- define "draco.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "draco.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The gate webhook's self-signed CA and serving certificate when cert-manager is not used,
as base64 data: "ca.crt", "tls.crt", "tls.key". Rendered once per helm run (memoized on
the root context, since every call of genCA makes a new CA) and kept across upgrades by
reading the Secret already in the cluster (lookup returns nothing under `helm template`).
*/}}
{{- define "draco.webhookTLS" -}}
{{- if not (hasKey .Values "__webhookTLS") -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "draco.webhookSecret" .) -}}
{{- $tls := dict -}}
{{- if and $secret (index ($secret.data | default dict) "ca.crt") -}}
{{- $tls = dict "ca.crt" (index $secret.data "ca.crt") "tls.crt" (index $secret.data "tls.crt") "tls.key" (index $secret.data "tls.key") -}}
{{- else -}}
{{- $service := include "draco.webhookName" . -}}
{{- $dns := list $service (printf "%s.%s" $service .Release.Namespace) (printf "%s.%s.svc" $service .Release.Namespace) -}}
{{- $ca := genCA "draco-webhook-ca" 3650 -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $service .Release.Namespace) nil $dns 3650 $ca -}}
{{- $tls = dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- $_ := set .Values "__webhookTLS" $tls -}}
{{- end -}}
{{- toYaml (get .Values "__webhookTLS") -}}
{{- end -}}

{{/* The hardening both Deployments share: non-root numeric user, RuntimeDefault seccomp,
read-only root filesystem, no privilege escalation, every capability dropped. */}}
{{- define "draco.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "draco.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* `helm upgrade --reuse-values` from a chart older than the webhook's own Deployment keeps
that chart's values, without the keys below: say so instead of failing on a nil map. */}}
{{- define "draco.webhookValuesPresent" -}}
{{- range $key := list "replicaCount" "podDisruptionBudget" "resources" -}}
{{- if not (hasKey $.Values.webhook $key) -}}
{{- fail (printf "webhook.%s is missing: values reused from an older chart (helm upgrade --reuse-values)? Upgrade with --reset-then-reuse-values instead" $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
