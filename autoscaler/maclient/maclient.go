// Package maclient is the typed client of MetricAutoscalers and the informer
// the controller caches them in. Lists, watch events and status writes are
// decoded from JSON straight into the API types: the dynamic client decoded
// them into maps and then converted those (at 1,000 objects, a third of the
// autoscaler's CPU went to that and its garbage).
package maclient

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
}

// Client reads and writes MetricAutoscalers.
type Client struct {
	rest   rest.Interface
	echoes *echoes
}

// NewForConfig makes a client from cfg (its host, credentials and rate
// limit); the content type is JSON, the only one custom resources serve.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	gv := v1alpha1.GroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	echoes := newEchoes()
	c.NegotiatedSerializer = newNegotiated(codecs.WithoutConversion(), echoes)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("MetricAutoscaler client: %w", err)
	}
	return &Client{rest: rc, echoes: echoes}, nil
}

// MetricAutoscalers is the typed client of one namespace ("" for all).
func (c *Client) MetricAutoscalers(ns string) *gentype.ClientWithList[*v1alpha1.MetricAutoscaler, *v1alpha1.MetricAutoscalerList] {
	return gentype.NewClientWithList[*v1alpha1.MetricAutoscaler, *v1alpha1.MetricAutoscalerList](
		v1alpha1.Resource, c.rest, metav1.ParameterCodec, ns,
		func() *v1alpha1.MetricAutoscaler { return &v1alpha1.MetricAutoscaler{} },
		func() *v1alpha1.MetricAutoscalerList { return &v1alpha1.MetricAutoscalerList{} })
}

// UpdateStatus writes ma's status (the status subresource) and returns the
// object as stored. A copy is kept for the watch event of this write
// (echoes).
func (c *Client) UpdateStatus(ctx context.Context, ma *v1alpha1.MetricAutoscaler) (*v1alpha1.MetricAutoscaler, error) {
	res := c.rest.Put().Namespace(ma.Namespace).Resource(v1alpha1.Resource).Name(ma.Name).SubResource("status").Body(ma).Do(ctx)
	out := &v1alpha1.MetricAutoscaler{}
	if err := res.Into(out); err != nil {
		return nil, err
	}
	if raw, _ := res.Raw(); len(raw) > 0 {
		c.echoes.put(raw, out.DeepCopy())
	}
	return out, nil
}

// NewInformer is a shared informer of the MetricAutoscalers of every
// namespace, with no index (the controller reads them by key).
func NewInformer(c *Client, resync time.Duration) cache.SharedIndexInformer {
	all := c.MetricAutoscalers(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return all.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return all.Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, c.rest),
		&v1alpha1.MetricAutoscaler{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}, ObjectDescription: v1alpha1.GroupVersionResource.String()})
}
