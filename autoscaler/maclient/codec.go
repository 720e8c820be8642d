package maclient

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// negotiated is the codec factory's serializers with JSON decoding replaced
// by direct: everything else (encoding, other media types) is the factory's.
type negotiated struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newNegotiated(base runtime.NegotiatedSerializer, echoes *echoes) negotiated {
	infos := append([]runtime.SerializerInfo(nil), base.SupportedMediaTypes()...)
	for i := range infos {
		if infos[i].MediaType != runtime.ContentTypeJSON {
			continue
		}
		infos[i].Serializer = direct{infos[i].Serializer, echoes}
		if s := infos[i].StreamSerializer; s != nil {
			stream := *s
			stream.Serializer = direct{s.Serializer, echoes}
			infos[i].StreamSerializer = &stream
		}
	}
	return negotiated{NegotiatedSerializer: base, infos: infos}
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

// direct decodes a MetricAutoscaler, a list of them or a watch event in one
// pass into the type. The generic JSON serializer first unmarshals the whole
// document once more to find its apiVersion and kind, and a watch event is
// decoded twice that way (the event, then its object): at 1,000 objects
// that was most of the autoscaler's decoding. Anything else, or a document
// of another kind (a Status, say), goes to the generic serializer. A watch
// event's object that is the echo of this client's own status write is not
// decoded at all (echoes).
type direct struct {
	runtime.Serializer
	echoes *echoes
}

func (d direct) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into := into.(type) {
	case nil:
		if d.echoes != nil {
			if ma := d.echoes.take(data); ma != nil {
				gvk := v1alpha1.GroupVersion.WithKind("MetricAutoscaler")
				return ma, &gvk, nil
			}
		}
		ma := &v1alpha1.MetricAutoscaler{}
		if gvk, ok := decodeKind(data, ma, "MetricAutoscaler"); ok {
			return ma, gvk, nil
		}
	case *v1alpha1.MetricAutoscaler:
		var ma v1alpha1.MetricAutoscaler
		if gvk, ok := decodeKind(data, &ma, "MetricAutoscaler"); ok {
			*into = ma
			return into, gvk, nil
		}
	case *v1alpha1.MetricAutoscalerList:
		var l v1alpha1.MetricAutoscalerList
		if gvk, ok := decodeKind(data, &l, "MetricAutoscalerList"); ok {
			*into = l
			return into, gvk, nil
		}
	case *metav1.WatchEvent:
		// An event has no apiVersion or kind of its own; its object stays
		// raw, for the watch's object decoder (this one again).
		var ev metav1.WatchEvent
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &ev); err == nil && ev.Type != "" {
			*into = ev
			gvk := v1alpha1.GroupVersion.WithKind("WatchEvent")
			return into, &gvk, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// decodeKind unmarshals data into obj and says whether it was a kind of this
// API group version: when not, obj is to be dropped.
func decodeKind(data []byte, obj runtime.Object, kind string) (*schema.GroupVersionKind, bool) {
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
		return nil, false
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk != v1alpha1.GroupVersion.WithKind(kind) {
		return nil, false
	}
	return &gvk, true
}
