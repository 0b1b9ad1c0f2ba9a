{{/* Names and labels shared by every template. */}}
{{- define "lattice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lattice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lattice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "lattice.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lattice.labels" -}}
{{ include "lattice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "lattice.webhookService" -}}
{{- printf "%s-webhook" (include "lattice.fullname" .) -}}
{{- end -}}

{{- define "lattice.tlsSecret" -}}
{{- printf "%s-webhook-tls" (include "lattice.fullname" .) -}}
{{- end -}}

{{- define "lattice.leaseName" -}}
{{- default (include "lattice.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The operator's settings file (lattice_operator.settings.OperatorSettings). */}}
{{- define "lattice.settings" -}}
{{- $le := .Values.leaderElection -}}
{{- $cert := dict "secret" (printf "%s/%s" .Release.Namespace (include "lattice.tlsSecret" .)) -}}
{{- if .Values.webhook.certManager.enabled -}}
{{- $_ := set $cert "manage" false -}}
{{- else -}}
{{- $_ := set $cert "validity" (mulf .Values.webhook.certValidityDays 86400) -}}
{{- $_ := set $cert "rotate_before" (mulf .Values.webhook.certRotateBeforeDays 86400) -}}
{{- end -}}
{{- $s := dict
  "namespaces" .Values.watchNamespaces
  "leader_election" (dict "enabled" $le.enabled "lease_name" (include "lattice.leaseName" .)
                          "lease_namespace" .Release.Namespace
                          "lease_duration" $le.leaseDurationSeconds
                          "renew_deadline" $le.renewDeadlineSeconds
                          "retry_period" $le.retryPeriodSeconds)
  "probe" (dict "host" "0.0.0.0" "port" .Values.probePort)
  "metrics_host" "0.0.0.0"
  "metrics_port" (ternary .Values.metrics.port 0 .Values.metrics.enabled)
  "webhook" (dict "host" "0.0.0.0" "port" .Values.webhook.port
               "url_host" (printf "%s.%s.svc" (include "lattice.webhookService" .) .Release.Namespace)
               "managed" nil
               "configuration" (include "lattice.fullname" .)
               "certificate" $cert)
-}}
{{- $backend := dict -}}
{{- if .Values.sprites.apiUrl }}{{- $_ := set $backend "api_url" .Values.sprites.apiUrl -}}{{- end -}}
{{- if .Values.sprites.tokenSecret }}{{- $_ := set $backend "token_secret" (printf "%s/%s" .Release.Namespace .Values.sprites.tokenSecret) -}}{{- end -}}
{{- if $backend }}{{- $_ := set $s "backend" $backend -}}{{- end -}}
{{- toYaml (mergeOverwrite $s (deepCopy .Values.settings)) -}}
{{- end -}}

{{/* Combinations the schema cannot express: fail before anything is installed. */}}
{{- define "lattice.validate" -}}
{{- $le := .Values.leaderElection -}}
{{- if le (float64 $le.leaseDurationSeconds) (float64 $le.renewDeadlineSeconds) -}}
{{- fail "leaderElection.leaseDurationSeconds must be greater than leaderElection.renewDeadlineSeconds" -}}
{{- end -}}
{{- if le (float64 $le.renewDeadlineSeconds) (mulf $le.retryPeriodSeconds 1.2) -}}
{{- fail "leaderElection.renewDeadlineSeconds must be greater than 1.2 x leaderElection.retryPeriodSeconds" -}}
{{- end -}}
{{- if ge (float64 .Values.webhook.certRotateBeforeDays) (float64 .Values.webhook.certValidityDays) -}}
{{- fail "webhook.certRotateBeforeDays must be less than webhook.certValidityDays" -}}
{{- end -}}
{{- end -}}
