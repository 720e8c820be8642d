package cluster

import "fmt"

// nodeYAML is a fake node that kwok manages.
func nodeYAML(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %[1]s
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
    metrics.k8s.io/resource-metrics-path: /metrics/nodes/%[1]s/metrics/resource
  labels:
    type: kwok
    kubernetes.io/hostname: %[1]s
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
status:
  allocatable: {cpu: "1000", memory: 4Ti, pods: "5000"}
  capacity: {cpu: "1000", memory: 4Ti, pods: "5000"}
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
`, name)
}

// apiServiceYAML registers an aggregated API served by service ns/svc on port.
func apiServiceYAML(name, group, version, ns, svc string, port, versionPriority int) string {
	return fmt.Sprintf(`---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: %s
spec:
  group: %s
  version: %s
  service: {namespace: %s, name: %s, port: %d}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: %d
`, name, group, version, ns, svc, port, versionPriority)
}

// externalNameServiceYAML is a Service that points at localhost, where the aggregated
// API servers run.
func externalNameServiceYAML(ns, name string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  type: ExternalName
  externalName: localhost
`, name, ns)
}
