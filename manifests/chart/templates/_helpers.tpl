{{/*
Prefix of every object's name: "metricscale" for a release named metricscale
(the names of the kustomize base), else "<release>-metricscale".
*/}}
{{- define "metricscale.fullname" -}}
{{- $name := .Values.nameOverride | default .Chart.Name -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The namespace of every namespaced object: namespaceOverride or the release's. */}}
{{- define "metricscale.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
{{- end -}}

{{/*
ServiceAccount names: <component>.serviceAccount.name, default the
component's name when the chart creates it, "default" when it does not.
*/}}
{{- define "metricscale.adapter.serviceAccountName" -}}
{{- $sa := .Values.adapter.serviceAccount -}}
{{- $sa.name | default (ternary (include "metricscale.adapter.name" .) "default" $sa.create) -}}
{{- end -}}
{{- define "metricscale.autoscaler.serviceAccountName" -}}
{{- $sa := .Values.autoscaler.serviceAccount -}}
{{- $sa.name | default (ternary (include "metricscale.autoscaler.name" .) "default" $sa.create) -}}
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
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
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

{{/*
An autoscaler probe: an httpGet without a scheme gets the one of port 8080,
HTTPS unless metrics.autoscaler.insecure; (dict "probe" . "root" $)
*/}}
{{- define "metricscale.autoscaler.probe" -}}
{{- $p := deepCopy .probe -}}
{{- if and (hasKey $p "httpGet") (not (hasKey $p.httpGet "scheme")) -}}
{{- $_ := set $p.httpGet "scheme" (ternary "HTTP" "HTTPS" .root.Values.metrics.autoscaler.insecure) -}}
{{- end -}}
{{- toYaml $p -}}
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
{{- $ns := (include "metricscale.namespace" $) -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.certs.clusterDomain) | toJson -}}
{{- end -}}

{{/* The autoscaler's Service, which the webhook's certificate names. */}}
{{- define "metricscale.autoscaler.dnsNames" -}}
{{- $svc := include "metricscale.autoscaler.name" . -}}
{{- $ns := (include "metricscale.namespace" $) -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.certs.clusterDomain) | toJson -}}
{{- end -}}

{{/* The autoscaler.webhook's kubernetes.io/tls Secret. */}}
{{- define "metricscale.autoscaler.webhookCertSecretName" -}}
{{- if eq .Values.certs.mode "provided" -}}
{{- required "autoscaler.webhook.provided.secretName is required with autoscaler.webhook.enabled and certs.mode=provided" .Values.autoscaler.webhook.provided.secretName -}}
{{- else -}}
{{- include "metricscale.autoscaler.name" . }}-webhook-cert
{{- end -}}
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
{{ include "metricscale.adapter.config" . }}
{{ end -}}

{{/*
The adapter.config value, or with prometheus.url (the prometheus-community
prometheus-adapter chart's layout) its providers and routes replaced by one
prometheus provider serving every metric with rules.*, as that chart renders
them into prometheus-adapter's rules file.
*/}}
{{- define "metricscale.adapter.config" -}}
{{- $c := deepCopy .Values.adapter.config -}}
{{- if .Values.prometheus.url -}}
{{- $p := .Values.prometheus -}}
{{- $url := tpl $p.url . -}}
{{- if $p.port }}{{ $url = printf "%s:%v" $url $p.port }}{{ end -}}
{{- $url = printf "%s%s" $url ($p.path | default "") -}}
{{- $opts := dict "url" $url -}}
{{- with .Values.metricsRelistInterval }}{{ $_ := set $opts "relistInterval" . }}{{ end -}}
{{- $rules := list -}}
{{- if .Values.rules.default }}{{ $rules = concat $rules (include "metricscale.prometheus.defaultRules" . | fromYamlArray) }}{{ end -}}
{{- with .Values.rules.custom }}{{ $rules = concat $rules (tpl (toYaml .) $ | fromYamlArray) }}{{ end -}}
{{- with $rules }}{{ $_ := set $opts "rules" . }}{{ end -}}
{{- with .Values.rules.external }}{{ $_ := set $opts "externalRules" . }}{{ end -}}
{{- with .Values.rules.resource }}{{ $_ := set $opts "resourceRules" . }}{{ end -}}
{{- $routes := list (dict "metric" "*" "provider" "prometheus") -}}
{{- if .Values.rules.resource }}{{ $routes = append $routes (dict "metric" "*" "provider" "prometheus" "kind" "resource") }}{{ end -}}
{{- $_ := set $c "providers" (list (dict "name" "prometheus" "type" "prometheus" "options" $opts)) -}}
{{- $_ := set $c "routes" $routes -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* metrics.k8s.io is served: adapter.metricsAPI.enabled, or resource rules with prometheus.url. */}}
{{- define "metricscale.adapter.metricsAPI" -}}
{{- if or .Values.adapter.metricsAPI.enabled (and .Values.prometheus.url .Values.rules.resource) -}}true{{- end -}}
{{- end -}}

{{/*
rules.default: the metrics of the prometheus-community prometheus-adapter
chart's default rules. cAdvisor's container_* series of a pod (the POD
sandbox left out) as pod metrics: *_seconds_total and other *_total counters
as 5m rates named without the suffix, the rest as they are. Every other
namespaced series as metrics of the objects its labels name: *_total
counters as 5m rates without the suffix (*_seconds_total ones without
"_seconds_total"), the rest as they are.
*/}}
{{- define "metricscale.prometheus.defaultRules" -}}
{{- $container := "{__name__=~\"^container_.*\",container!=\"POD\",namespace!=\"\",pod!=\"\"}" -}}
{{- $other := "{namespace!=\"\",__name__!~\"^container_.*\"}" -}}
{{- $podRes := dict "overrides" (dict "namespace" (dict "resource" "namespace") "pod" (dict "resource" "pod")) -}}
{{- $byLabel := dict "template" "<<.Resource>>" -}}
{{- $rate := "sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)" -}}
{{- $cRate := "sum(rate(<<.Series>>{<<.LabelMatchers>>,container!=\"POD\"}[5m])) by (<<.GroupBy>>)" -}}
{{- list
  (dict "seriesQuery" $container "seriesFilters" list "resources" $podRes
        "name" (dict "matches" "^container_(.*)_seconds_total$" "as" "") "metricsQuery" $cRate)
  (dict "seriesQuery" $container "seriesFilters" (list (dict "isNot" "^container_.*_seconds_total$")) "resources" $podRes
        "name" (dict "matches" "^container_(.*)_total$" "as" "") "metricsQuery" $cRate)
  (dict "seriesQuery" $container "seriesFilters" (list (dict "isNot" "^container_.*_total$")) "resources" $podRes
        "name" (dict "matches" "^container_(.*)$" "as" "")
        "metricsQuery" "sum(<<.Series>>{<<.LabelMatchers>>,container!=\"POD\"}) by (<<.GroupBy>>)")
  (dict "seriesQuery" $other "seriesFilters" (list (dict "isNot" ".*_total$")) "resources" $byLabel
        "name" (dict "matches" "" "as" "") "metricsQuery" "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)")
  (dict "seriesQuery" $other "seriesFilters" (list (dict "isNot" ".*_seconds_total")) "resources" $byLabel
        "name" (dict "matches" "^(.*)_total$" "as" "") "metricsQuery" $rate)
  (dict "seriesQuery" $other "seriesFilters" list "resources" $byLabel
        "name" (dict "matches" "^(.*)_seconds_total$" "as" "") "metricsQuery" $rate)
  | toYaml -}}
{{- end -}}

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
{{- range $k := list "rules" "externalRules" "resourceRules" -}}
{{- if hasKey $.Values.adapter.config $k -}}
{{- fail (printf "adapter.config.%s: adapter.config is the adapter's own config, not a prometheus-adapter rules file: give the rules as rules.custom, rules.external and rules.resource with prometheus.url (README.md, \"Coming from prometheus-adapter\"), or under a prometheus provider's options in adapter.config" $k) -}}
{{- end -}}
{{- end -}}
{{- if .Values.rules.existing -}}
{{- fail "rules.existing: a ConfigMap of prometheus-adapter rules is not mounted by this chart: give the rules as rules.custom, rules.external and rules.resource (or as adapter.config)" -}}
{{- end -}}
{{- if and .Values.prometheus.url (not (or .Values.rules.default .Values.rules.custom .Values.rules.external .Values.rules.resource)) -}}
{{- fail "rules: prometheus.url without rules (rules.default false, no rules.custom, rules.external or rules.resource): the Prometheus provider would serve nothing" -}}
{{- end -}}
{{- if and .Values.prometheus.url .Values.adapter.enabled .Values.adapter.push.enabled -}}
{{- fail "prometheus.url: the adapter then serves every metric from Prometheus and the push endpoint has no memory provider to feed: set adapter.push.enabled=false, or write adapter.config with a prometheus provider and a memory provider instead of prometheus.url" -}}
{{- end -}}
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
{{- $webhook := and .Values.autoscaler.enabled .Values.autoscaler.webhook.enabled -}}
{{- if and $webhook (eq .Values.certs.mode "adapter") -}}
{{- fail "autoscaler.webhook: kube-apiserver verifies a webhook's certificate (there is no insecureSkipTLSVerify for webhooks), and with certs.mode=adapter there is no CA: use certs.mode=selfSigned, certManager or provided" -}}
{{- end -}}
{{- if and $webhook (eq .Values.certs.mode "provided") -}}
{{- if not .Values.autoscaler.webhook.provided.secretName -}}
{{- fail "autoscaler.webhook.provided.secretName is required with certs.mode=provided (a kubernetes.io/tls Secret for the autoscaler Service's names, signed by the CA of certs.provided.caBundle)" -}}
{{- end -}}
{{- if not (b64dec .Values.certs.provided.caBundle | contains "-----BEGIN CERTIFICATE-----") -}}
{{- fail "certs.provided.caBundle is required with autoscaler.webhook.enabled and certs.mode=provided (base64 of the PEM CA that signed the webhook's certificate)" -}}
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

{{/* A PodDisruptionBudget's minAvailable or maxUnavailable (one of them), from (dict enabled minAvailable maxUnavailable). */}}
{{- define "metricscale.pdbSpec" -}}
{{- if not (kindIs "invalid" .maxUnavailable) -}}
maxUnavailable: {{ .maxUnavailable }}
{{- else -}}
minAvailable: {{ .minAvailable }}
{{- end -}}
{{- end -}}
