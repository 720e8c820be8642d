{{/*
Prefix of every object's name: "metricscale" for a release named metricscale
(the names of the kustomize base), else "<release>-metricscale".
*/}}
{{- define "metricscale.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "metricscale.adapter.name" -}}{{ include "metricscale.fullname" . }}-adapter{{- end -}}
{{- define "metricscale.autoscaler.name" -}}{{ include "metricscale.fullname" . }}-autoscaler{{- end -}}

{{/*
Labels. app.kubernetes.io/name and part-of are those of the kustomize base (the
selectors use name only); the other four are Helm's own, which the equivalence
test with the kustomize base ignores.
*/}}
{{- define "metricscale.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "metricscale.adapter.selectorLabels" -}}
app.kubernetes.io/name: metricscale-adapter
{{- end -}}

{{- define "metricscale.adapter.labels" -}}
{{ include "metricscale.adapter.selectorLabels" . }}
app.kubernetes.io/part-of: metricscale
{{ include "metricscale.helmLabels" . }}
{{- end -}}

{{- define "metricscale.autoscaler.selectorLabels" -}}
app.kubernetes.io/name: metricscale-autoscaler
{{- end -}}

{{- define "metricscale.autoscaler.labels" -}}
{{ include "metricscale.autoscaler.selectorLabels" . }}
app.kubernetes.io/part-of: metricscale
{{ include "metricscale.helmLabels" . }}
{{- end -}}

{{/* image: repository and tag of one component; (dict "root" $ "component" "adapter") */}}
{{- define "metricscale.image" -}}
{{- $v := index .root.Values .component -}}
{{- $repo := $v.image.repository | default (printf "%s/%s" .root.Values.image.registry .component) -}}
{{- printf "%s:%s" $repo ($v.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}

{{/* The adapter's Service, which the APIServices and the certificate name. */}}
{{- define "metricscale.adapter.dnsNames" -}}
{{- $svc := include "metricscale.adapter.name" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.certs.clusterDomain) | toJson -}}
{{- end -}}

{{- define "metricscale.adapter.certSecretName" -}}
{{- if eq .Values.certs.mode "provided" -}}
{{- required "certs.provided.secretName is required with certs.mode=provided" .Values.certs.provided.secretName -}}
{{- else -}}
{{- include "metricscale.adapter.name" . }}-serving-cert
{{- end -}}
{{- end -}}

{{- define "metricscale.adapter.pushTokenSecretName" -}}
{{- .Values.adapter.push.tokenSecret.name | default (printf "%s-push-token" (include "metricscale.adapter.name" .)) -}}
{{- end -}}

{{/*
The config file's text: a fixed header and the adapter.config value.
manifests/adapter/config.yaml holds exactly this text for the default value, so
both name the ConfigMap with the same hash.
*/}}
{{- define "metricscale.adapter.configText" -}}
# The adapter's --config: which providers run and which metrics each serves.
# Validate with: adapter check-config -f config.yaml
{{ toYaml .Values.adapter.config }}
{{ end -}}

{{/*
The ConfigMap's name. With configHashSuffix, kustomize's configMapGenerator
suffix (sigs.k8s.io/kustomize/api/hasher): the first 10 hex digits of the
SHA-256 of {"data":...,"kind":"ConfigMap","name":""}, with 0 1 3 a e
replaced by g h k m t. The name is empty as in kustomize, whose hasher looks
up "metadata/name" as one key and finds none (hack/helm's tests compare the
two).
*/}}
{{- define "metricscale.adapter.configMapName" -}}
{{- $base := printf "%s-config" (include "metricscale.adapter.name" .) -}}
{{- if .Values.adapter.configHashSuffix -}}
{{- $data := dict "config.yaml" (include "metricscale.adapter.configText" .) -}}
{{- $sum := toJson (dict "data" $data "kind" "ConfigMap" "name" "") | sha256sum | trunc 10 -}}
{{- printf "%s-%s" $base ($sum | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t") -}}
{{- else -}}
{{- $base -}}
{{- end -}}
{{- end -}}

{{/*
The resource reader's rules: list and watch on pods (the adapter always watches
them) and on every selectorResources entry ("deployments.apps"), one rule per
API group, the core group first.
*/}}
{{- define "metricscale.adapter.selectorRules" -}}
{{- $groups := dict "" (list "pods") -}}
{{- $resources := .Values.adapter.config.selectorResources | default (list "pods" "namespaces") -}}
{{- range $resources -}}
{{- $parts := regexSplit "\\." . 2 -}}
{{- $res := index $parts 0 -}}
{{- $group := "" -}}
{{- if gt (len $parts) 1 }}{{ $group = index $parts 1 }}{{ end -}}
{{- if not (and (eq $group "") (eq $res "pods")) -}}
{{- $_ := set $groups $group (append (get $groups $group | default list) $res) -}}
{{- end -}}
{{- end -}}
{{- range $group := keys $groups | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources: {{ get $groups $group | toJson }}
  verbs: ["list", "watch"]
{{- end -}}
{{- end -}}

{{/* Checks across values that values.schema.json cannot express with a clear message. */}}
{{- define "metricscale.validate" -}}
{{- if and (not .Values.adapter.enabled) (not .Values.autoscaler.enabled) -}}
{{- fail "adapter.enabled and autoscaler.enabled are both false: the chart would install nothing" -}}
{{- end -}}
{{- $feed := .Values.autoscaler.changeFeed -}}
{{- if and .Values.autoscaler.enabled $feed.enabled (not $feed.insecureSkipTLSVerify) -}}
{{- if not .Values.adapter.enabled -}}
{{- fail "autoscaler.changeFeed: without the chart's adapter (adapter.enabled=false) there is no CA to verify the adapter with: set autoscaler.changeFeed.url and insecureSkipTLSVerify, or install the adapter with the chart" -}}
{{- end -}}
{{- if eq .Values.certs.mode "adapter" -}}
{{- fail "autoscaler.changeFeed: with certs.mode=adapter each adapter replica makes its own certificate, which the autoscaler cannot verify: use certs.mode=selfSigned, certManager or provided, or set autoscaler.changeFeed.insecureSkipTLSVerify=true (test clusters)" -}}
{{- end -}}
{{- end -}}
{{- if .Values.adapter.enabled -}}
{{- if eq .Values.certs.mode "provided" -}}
{{- if not .Values.certs.provided.secretName -}}
{{- fail "certs.provided.secretName is required with certs.mode=provided (a kubernetes.io/tls Secret in the release namespace)" -}}
{{- end -}}
{{- if not .Values.certs.provided.caBundle -}}
{{- fail "certs.provided.caBundle is required with certs.mode=provided (base64 of the PEM CA that signed the Secret's tls.crt)" -}}
{{- end -}}
{{- if not (b64dec .Values.certs.provided.caBundle | contains "-----BEGIN CERTIFICATE-----") -}}
{{- fail "certs.provided.caBundle: not a base64-encoded PEM certificate (encode the CA file with base64 -w0)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
