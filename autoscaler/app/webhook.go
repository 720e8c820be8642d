package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/autoscaler/admission"
	"github.com/metricscale/metricscale/autoscaler/secureserve"
	"github.com/metricscale/metricscale/autoscaler/validation"
)

// WebhookOptions configure the MetricAutoscalers' validating admission
// webhook, off unless Port is set.
type WebhookOptions struct {
	// BindAddress is the IP it listens on.
	BindAddress string
	// Port 0 leaves it off.
	Port int
	// CertDir holds tls.crt and tls.key (a kubernetes.io/tls Secret's
	// keys), reloaded when they change.
	CertDir string
}

// AddFlags registers the webhook's flags.
func (o *WebhookOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Port, "webhook-port", o.Port, "port of the MetricAutoscalers' validating admission webhook (HTTPS, path "+admission.Path+"), which refuses what the CRD cannot check (a formula that does not compile, is not a number or costs too much; a schedule's cron expression or time zone); 0: off")
	fs.StringVar(&o.BindAddress, "webhook-bind-address", o.BindAddress, "IP address the webhook listens on")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir, "directory of the webhook's serving certificate, tls.crt and tls.key (as a kubernetes.io/tls Secret mounts them), signed by the CA of the ValidatingWebhookConfiguration's caBundle; reloaded when the files change; required with --webhook-port")
}

// Validate checks the webhook's flags.
func (o *WebhookOptions) Validate() error {
	if o.Port == 0 {
		return nil
	}
	var errs []error
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be between 0 and 65535, got %d", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--webhook-cert-dir is required with --webhook-port: kube-apiserver verifies the webhook's certificate against the caBundle of its configuration, which a generated self-signed one cannot match"))
	}
	if net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--webhook-bind-address must be an IP address, got %q", o.BindAddress))
	}
	return errors.Join(errs...)
}

// serveWebhook serves the webhook until ctx ends, on every replica: the
// API server calls any endpoint of the Service, and the checks need
// neither the leader's state nor the caches.
//
// There is no delegated authentication or authorization in front of it, as
// there is in front of /metrics: kube-apiserver presents no credentials to
// a webhook unless its --admission-control-config-file gives some, and an
// AdmissionReview answer discloses nothing the caller did not send.
func (o *WebhookOptions) serveWebhook(ctx context.Context) error {
	if o.Port == 0 {
		return nil
	}
	srv, err := secureserve.Options{
		Flag: "--webhook-port", BindAddress: net.JoinHostPort(o.BindAddress, strconv.Itoa(o.Port)),
		CertFile: filepath.Join(o.CertDir, "tls.crt"), KeyFile: filepath.Join(o.CertDir, "tls.key"),
		Anonymous: true,
	}.Listen("the admission webhook")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	// The CRD accepts minReplicas 0 whatever the HPAScaleToZero gate.
	mux.Handle(admission.Path, &admission.Handler{Options: validation.Options{ScaleToZero: true}})
	if err := srv.Serve(ctx, mux); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Serving the admission webhook", "address", net.JoinHostPort(o.BindAddress, strconv.Itoa(o.Port)), "path", admission.Path)
	return nil
}
