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

{{/* The webhook serving certificate, made once per install and kept across upgrades
     (lookup), unless cert-manager provides it. Returns YAML: ca, crt, key. */}}
{{- define "lattice.webhookCert" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "lattice.tlsSecret" .) -}}
{{- if and $existing $existing.data (index $existing.data "ca.crt") -}}
ca: {{ index $existing.data "ca.crt" }}
crt: {{ index $existing.data "tls.crt" }}
key: {{ index $existing.data "tls.key" }}
{{- else -}}
{{- $svc := include "lattice.webhookService" . -}}
{{- $days := int .Values.webhook.certValidityDays -}}
{{- $ca := genCA (printf "%s-ca" (include "lattice.fullname" .)) $days -}}
{{- $names := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc .Release.Namespace) nil $names $days $ca -}}
ca: {{ $ca.Cert | b64enc }}
crt: {{ $cert.Cert | b64enc }}
key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}

{{/* The operator's settings file (lattice_operator.settings.OperatorSettings). */}}
{{- define "lattice.settings" -}}
{{- $s := dict
  "namespaces" .Values.watchNamespaces
  "peering" (dict "name" (include "lattice.fullname" .) "standalone" (eq (int .Values.replicaCount) 1))
  "probe" (dict "host" "0.0.0.0" "port" .Values.probePort)
  "metrics_host" "0.0.0.0"
  "metrics_port" (ternary .Values.metrics.port 0 .Values.metrics.enabled)
  "webhook" (dict "host" "0.0.0.0" "port" .Values.webhook.port
               "url_host" (printf "%s.%s.svc" (include "lattice.webhookService" .) .Release.Namespace)
               "cert_file" "/tls/tls.crt" "key_file" "/tls/tls.key" "ca_file" "/tls/ca.crt"
               "managed" nil)
-}}
{{- $backend := dict -}}
{{- if .Values.sprites.apiUrl }}{{- $_ := set $backend "api_url" .Values.sprites.apiUrl -}}{{- end -}}
{{- if .Values.sprites.tokenSecret }}{{- $_ := set $backend "token_secret" (printf "%s/%s" .Release.Namespace .Values.sprites.tokenSecret) -}}{{- end -}}
{{- if $backend }}{{- $_ := set $s "backend" $backend -}}{{- end -}}
{{- toYaml (mergeOverwrite $s (deepCopy .Values.settings)) -}}
{{- end -}}
