// Package recordclient fetches a MetricAutoscaler's recording from the
// autoscaler that leads (`autoscaler record`), with the caller's own
// Kubernetes credentials, which the autoscaler has the API server check.
//
// The leader is reached either at a URL (--server: a local autoscaler, or
// one exposed by a Service or an earlier `kubectl port-forward`) or, by
// default, through a port-forward to the leader's pod: the pod is the one
// the leader Lease names (an identity of the form POD or POD_PID), and the
// tunnel goes through the API server, which authorizes it (create
// pods/portforward in the autoscaler's namespace).
package recordclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/recordserver"
)

// Options say what to fetch and how to reach the autoscaler.
type Options struct {
	Namespace, Name string
	// Last limits the recording to its last reconciles (0: all of it).
	Last time.Duration
	// Server is the autoscaler's HTTPS URL; empty, a port-forward to the
	// leader's pod on Port.
	Server string
	Port   int
	// LeaseNamespace and LeaseName name the leader Lease.
	LeaseNamespace, LeaseName string
	// Kubeconfig and Context select the credentials (the usual kubeconfig
	// loading rules when empty).
	Kubeconfig, Context string
	// CAFile verifies the autoscaler's serving certificate, for
	// ServerName; Insecure skips the verification.
	CAFile, ServerName string
	Insecure           bool
	// Timeout bounds the whole fetch.
	Timeout time.Duration
}

// Fetch returns the recording.
func Fetch(ctx context.Context, o Options) (*record.Recording, error) {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	server := o.Server
	verifyDefault := true
	if server == "" {
		addr, stop, err := forwardToLeader(ctx, cfg, o)
		if err != nil {
			return nil, err
		}
		defer stop()
		server = "https://" + addr
		// The tunnel reaches the very pod the API server names; its
		// certificate is self-signed unless --tls-cert-file was given.
		verifyDefault = false
	}
	return get(ctx, cfg, server, o, verifyDefault)
}

func (o Options) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// get asks the autoscaler at server for the recording, presenting the
// kubeconfig's credentials (its bearer token or client certificate).
func get(ctx context.Context, cfg *rest.Config, server string, o Options, verifyDefault bool) (*record.Recording, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want an https:// URL", server)
	}
	c := rest.CopyConfig(cfg)
	c.Host = server
	c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = o.CAFile, nil
	c.TLSClientConfig.ServerName = o.ServerName
	c.TLSClientConfig.Insecure = o.Insecure || (o.CAFile == "" && !verifyDefault)
	if c.TLSClientConfig.Insecure {
		c.TLSClientConfig.CAFile = ""
	}
	rt, err := rest.TransportFor(c)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig's credentials: %w", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + recordserver.Path(o.Namespace, o.Name)
	if o.Last > 0 {
		u.RawQuery = url.Values{"last": {o.Last.String()}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		if errors.As(err, new(*tls.CertificateVerificationError)) {
			return nil, fmt.Errorf("%w (pass the autoscaler's CA with --certificate-authority, or --insecure-skip-tls-verify)", err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the recording: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, body)
	}
	rec := &record.Recording{}
	if err := json.Unmarshal(body, rec); err != nil {
		return nil, fmt.Errorf("decoding the recording: %w", err)
	}
	return rec, nil
}

// StatusError is an error answer of the autoscaler.
type StatusError struct {
	Code    int
	Message string
	// Leader is set on a 503 from a replica that does not lead.
	Leader string
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Code) }

func statusError(resp *http.Response, body []byte) error {
	e := &StatusError{Code: resp.StatusCode, Leader: resp.Header.Get(recordserver.LeaderHeader)}
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		e.Message = st.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	return e
}

var identitySuffix = regexp.MustCompile(`_[0-9]+$`)

// PodOf is the pod a leader identity names: the identity itself, or without
// its _PID suffix (the autoscaler's default identity is HOSTNAME_PID, and a
// pod's hostname is its name).
func PodOf(identity string) string {
	return identitySuffix.ReplaceAllString(identity, "")
}

// leaderPod is the pod of the autoscaler the leader Lease names.
func leaderPod(ctx context.Context, kube kubernetes.Interface, o Options) (string, error) {
	lease, err := kube.CoordinationV1().Leases(o.LeaseNamespace).Get(ctx, o.LeaseName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("finding the leader in Lease %s/%s: %w (or pass --server)", o.LeaseNamespace, o.LeaseName, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "", fmt.Errorf("Lease %s/%s has no holder: no autoscaler leads now", o.LeaseNamespace, o.LeaseName)
	}
	identity := *lease.Spec.HolderIdentity
	pod := PodOf(identity)
	if _, err := kube.CoreV1().Pods(o.LeaseNamespace).Get(ctx, pod, metav1.GetOptions{}); err != nil {
		return "", fmt.Errorf("the leader %q is not a pod in namespace %s (%w): an autoscaler outside the cluster is reached with --server", identity, o.LeaseNamespace, err)
	}
	return pod, nil
}

// forwardToLeader opens a port-forward to the leader's pod and returns the
// local address, and how to close it.
func forwardToLeader(ctx context.Context, cfg *rest.Config, o Options) (string, func(), error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, err
	}
	pod, err := leaderPod(ctx, kube, o)
	if err != nil {
		return "", nil, err
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return "", nil, err
	}
	pfURL := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(o.LeaseNamespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, pfURL)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(o.Port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		return "", nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return "", nil, fmt.Errorf("port-forward to pod %s/%s:%d: %w %s", o.LeaseNamespace, pod, o.Port, err, errOut.String())
	case <-ctx.Done():
		close(stop)
		return "", nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stop)
		return "", nil, fmt.Errorf("port-forward to pod %s/%s: no local port: %v", o.LeaseNamespace, pod, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local), func() { close(stop) }, nil
}
