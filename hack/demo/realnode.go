package main

// make demo NODE=real: the workers are real pods of the worker image (hack/worker, built
// by make images) on the local cluster's real node, consuming from the broker; the demo
// only publishes the arriving jobs and reads the depth the adapter serves.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/metricscale/metricscale/hack/backends"
	"github.com/metricscale/metricscale/hack/cluster"
)

// realWorkers are the settings of the real worker pods.
type realWorkers struct {
	archive string // the worker image's docker archive (make images)
	ref     string // its name, ghcr.io/metricscale/worker:VERSION
	node    string // the real node's name, found by prepare
}

const (
	secretName = "worker-backend"
	secretDir  = "/etc/metricscale-backend"
	workerPort = 8080
)

// prepare makes the broker listen where pods reach it, loads the worker image into the
// real node, and finds the node; it returns the env as it is now.
func (r *realWorkers) prepare(ctx context.Context, local *cluster.Cluster, kube kubernetes.Interface, backendName string) (map[string]string, error) {
	if !slices.Contains(backends.PodAddressBackends, backendName) {
		return nil, fmt.Errorf("NODE=real: pods reach only the backends that listen on the host's address (%s), not %s", strings.Join(backends.PodAddressBackends, ", "), backendName)
	}
	node, err := readyRealNode(ctx, kube)
	if err != nil {
		return nil, err
	}
	r.node = node
	// The broker of the cluster listens on 127.0.0.1; the pods reach the host's address.
	// (hack/cluster up --real-node may have done it already: then this changes nothing.)
	host, err := backends.HostAddress()
	if err != nil {
		return nil, err
	}
	b, err := backends.Lookup(backendName)
	if err != nil {
		return nil, err
	}
	if err := backends.SetPodAddress(local.Dir, host); err != nil {
		return nil, err
	}
	if err := b.Start(ctx, local.Dir, os.Stdout); err != nil { // rebinds the running server
		return nil, err
	}
	if _, err := os.Stat(r.archive); err != nil {
		return nil, fmt.Errorf("the worker image: %w (make demo NODE=real runs make images first)", err)
	}
	fmt.Printf("==> loading %s into the real node %s\n", r.archive, node)
	if err := local.Run(ctx, "load-images", []string{r.archive}); err != nil {
		return nil, fmt.Errorf("hack/cluster.sh load-images %s: %w", r.archive, err)
	}
	return local.EnvMap()
}

// readyRealNode is the name of the Ready node that is not one of kwok's.
func readyRealNode(ctx context.Context, kube kubernetes.Interface) (string, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type!=kwok"})
	if err != nil {
		return "", fmt.Errorf("listing the nodes: %w", err)
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return n.Name, nil
			}
		}
	}
	return "", fmt.Errorf("NODE=real: the local cluster has no Ready real node (%d non-kwok nodes); restart it: hack/cluster.sh down && make demo NODE=real", len(nodes.Items))
}

// backendSecret holds the files the backend's env names (its *_FILE variables): the
// pods read the same passwords, mounted at secretDir.
func backendSecret(env map[string]string, backendName string) (*corev1.Secret, []corev1.EnvVar, error) {
	prefix := "METRICSCALE_" + strings.ToUpper(backendName) + "_"
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: namespace}, Data: map[string][]byte{}}
	var vars []corev1.EnvVar
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		v := env[k]
		if strings.HasSuffix(k, "_FILE") {
			b, err := os.ReadFile(v)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", k, err)
			}
			file := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, prefix), "_", "-"))
			s.Data[file] = b
			v = filepath.Join(secretDir, file)
		}
		vars = append(vars, corev1.EnvVar{Name: k, Value: v})
	}
	return s, vars, nil
}

// podSpec runs the worker image on the real node, one job at a time taking 1/drainRate s:
// the rate the modelled workers drain.
func (r *realWorkers) podSpec(backendName string, vars []corev1.EnvVar) corev1.PodSpec {
	yes, no, grace := true, false, int64(10)
	env := append([]corev1.EnvVar{
		{Name: "METRICSCALE_WORKER_BACKEND", Value: backendName},
		{Name: "METRICSCALE_WORKER_JOB_TIME", Value: (time.Second / drainRate).String()},
		{Name: "METRICSCALE_WORKER_CONCURRENCY", Value: "1"},
	}, vars...)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(workerPort)}}, PeriodSeconds: 2}
	}
	return corev1.PodSpec{
		NodeSelector:                  map[string]string{"kubernetes.io/hostname": r.node},
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{
			Name:  "worker",
			Image: r.ref,
			// loaded into the node's containerd: nothing is pulled
			ImagePullPolicy: corev1.PullNever,
			Args:            []string{fmt.Sprintf("--listen=:%d", workerPort)},
			Env:             env,
			Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: workerPort}},
			ReadinessProbe:  probe("/readyz"),
			LivenessProbe:   probe("/healthz"),
			VolumeMounts:    []corev1.VolumeMount{{Name: "backend", MountPath: secretDir, ReadOnly: true}},
			SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &yes, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
			}},
		}},
		Volumes: []corev1.Volume{{Name: "backend", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName}}}},
	}
}

// describeWorkers prints the worker pods' state and last events, for a failed run.
func describeWorkers(ctx context.Context, kube kubernetes.Interface) {
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		fmt.Printf("  pod %s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				fmt.Printf(" (%s: %s)", w.Reason, w.Message)
			}
		}
		fmt.Println()
	}
	events, err := kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := max(0, len(events.Items)-10); i < len(events.Items); i++ {
		e := events.Items[i]
		fmt.Printf("  event %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
	}
}
