package maclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// wire is a MetricAutoscaler as the API server sent it in the benchmark.
func wire(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/stored.json")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(data)
}

const notFound = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"metricautoscalers.autoscaling.metricscale.dev \"w-0\" not found","reason":"NotFound","details":{"name":"w-0","group":"autoscaling.metricscale.dev","kind":"metricautoscalers"},"code":404}`

// events is a watch stream of n copies of obj, then one ERROR event.
func events(obj []byte, n int) []byte {
	var b bytes.Buffer
	for range n {
		fmt.Fprintf(&b, "{\"type\":\"MODIFIED\",\"object\":%s}\n", obj)
	}
	fmt.Fprintf(&b, "{\"type\":\"ERROR\",\"object\":%s}\n", strings.Replace(notFound, `"code":404`, `"code":410`, 1))
	return b.Bytes()
}

// watchDecoder decodes a watch stream as the REST client does, with the
// serializers of ns.
func watchDecoder(t testing.TB, ns runtime.NegotiatedSerializer, stream []byte) *restclientwatch.Decoder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok || info.StreamSerializer == nil {
		t.Fatal("no JSON stream serializer")
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), ns.DecoderToVersion(info.Serializer, nil))
}

// TestDirectDecode: each document decodes to what the generic serializer
// makes of it, whether the direct path takes it or hands it on.
func TestDirectDecode(t *testing.T) {
	t.Parallel()
	obj := wire(t)
	list := []byte(`{"apiVersion":"autoscaling.metricscale.dev/v1alpha1","kind":"MetricAutoscalerList","metadata":{"resourceVersion":"7"},"items":[` + string(obj) + `]}`)
	bookmark := []byte(`{"apiVersion":"autoscaling.metricscale.dev/v1alpha1","kind":"MetricAutoscaler","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}`)
	otherKind := bytes.Replace(obj, []byte(`"kind":"MetricAutoscaler"`), []byte(`"kind":"Other"`), 1)
	otherGroup := bytes.Replace(obj, []byte(`"apiVersion":"autoscaling.metricscale.dev/v1alpha1"`), []byte(`"apiVersion":"example.com/v1alpha1"`), 1)
	cases := []struct {
		name string
		data []byte
		into func() runtime.Object
	}{
		{"object into nil", obj, func() runtime.Object { return nil }},
		{"object into typed", obj, func() runtime.Object { return &v1alpha1.MetricAutoscaler{} }},
		{"list", list, func() runtime.Object { return &v1alpha1.MetricAutoscalerList{} }},
		{"bookmark", bookmark, func() runtime.Object { return nil }},
		{"status into typed", []byte(notFound), func() runtime.Object { return &v1alpha1.MetricAutoscaler{} }},
		{"status into nil", []byte(notFound), func() runtime.Object { return nil }},
		{"another kind", otherKind, func() runtime.Object { return nil }},
		{"another group", otherGroup, func() runtime.Object { return &v1alpha1.MetricAutoscaler{} }},
		{"event", []byte(`{"type":"ADDED","object":` + string(obj) + `}`), func() runtime.Object { return &metav1.WatchEvent{} }},
		{"malformed", obj[:len(obj)-1], func() runtime.Object { return &v1alpha1.MetricAutoscaler{} }},
	}
	generic, fast := codecs.WithoutConversion(), newNegotiated(codecs.WithoutConversion(), nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			decode := func(ns runtime.NegotiatedSerializer) (runtime.Object, error) {
				info, _ := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
				out, _, err := ns.DecoderToVersion(info.Serializer, nil).Decode(tc.data, nil, tc.into())
				return out, err
			}
			want, wantErr := decode(generic)
			got, err := decode(fast)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("error %v, the generic serializer's %v", err, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%#v\nthe generic serializer\n%#v", got, want)
			}
		})
	}
}

// TestDirectWatch: a watch stream decodes to the same events as with the
// generic serializer, its ERROR event included.
func TestDirectWatch(t *testing.T) {
	t.Parallel()
	stream := events(wire(t), 3)
	collect := func(ns runtime.NegotiatedSerializer) []watch.Event {
		d := watchDecoder(t, ns, stream)
		var out []watch.Event
		for {
			typ, obj, err := d.Decode()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, watch.Event{Type: typ, Object: obj})
		}
	}
	want, got := collect(codecs.WithoutConversion()), collect(newNegotiated(codecs.WithoutConversion(), nil))
	if len(got) != 4 || got[3].Type != watch.Error {
		t.Fatalf("got %d events, the last %v; want 3 and an ERROR", len(got), got[len(got)-1].Type)
	}
	if _, ok := got[0].Object.(*v1alpha1.MetricAutoscaler); !ok {
		t.Errorf("event object is a %T", got[0].Object)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n%#v\nthe generic serializer's\n%#v", got, want)
	}
}

// TestClientOverHTTP: the client's requests, through client-go's REST
// client: a status write's answer, a 404's Status, and a watch.
func TestClientOverHTTP(t *testing.T) {
	t.Parallel()
	obj := wire(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			_, _ = w.Write(events(obj, 2))
		case r.Method == http.MethodPut:
			// as the API server answers: the object and a newline
			_, _ = w.Write(append(append([]byte(nil), obj...), '\n'))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(notFound))
		}
	}))
	t.Cleanup(srv.Close)
	c, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	written, err := c.UpdateStatus(ctx, &v1alpha1.MetricAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "ns"}})
	if err != nil {
		t.Fatal(err)
	}
	if written.Name != "w-0" || written.ResourceVersion != "19770" || written.Status.DesiredReplicas != 3 {
		t.Errorf("status write returned %s rv %s desired %d", written.Name, written.ResourceVersion, written.Status.DesiredReplicas)
	}
	if _, err := c.MetricAutoscalers("ns").Get(ctx, "w-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get: %v, want NotFound", err)
	}
	w, err := c.MetricAutoscalers("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var types []watch.EventType
	var objs []runtime.Object
	for ev := range w.ResultChan() {
		types = append(types, ev.Type)
		objs = append(objs, ev.Object)
		if ev.Type == watch.Error {
			if st, ok := ev.Object.(*metav1.Status); !ok || st.Code != 410 {
				t.Errorf("ERROR event holds %#v", ev.Object)
			}
			continue
		}
		if ma, ok := ev.Object.(*v1alpha1.MetricAutoscaler); !ok || ma.Name != "w-0" {
			t.Errorf("%s event holds %#v", ev.Type, ev.Object)
		}
	}
	if fmt.Sprint(types) != "[MODIFIED MODIFIED ERROR]" {
		t.Fatalf("events %v", types)
	}
	// The first event is the status write's echo, taken from the write's
	// answer; the second the same bytes again, decoded.
	c.echoes.mu.Lock()
	kept := len(c.echoes.byHash)
	c.echoes.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d echoes still kept, want the write's taken", kept)
	}
	if objs[0] == objs[1] || !reflect.DeepEqual(objs[0], objs[1]) {
		t.Errorf("the echo and the decoded event differ (or are one object):\n%#v\n%#v", objs[0], objs[1])
	}
	if objs[0] == runtime.Object(written) {
		t.Error("the watch got the object the write returned, which its caller may change")
	}
}

// TestEchoes: a kept write is taken once, by the same bytes only, and the
// oldest is dropped at capacity.
func TestEchoes(t *testing.T) {
	t.Parallel()
	e := newEchoes()
	raw := wire(t)
	ma := &v1alpha1.MetricAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "w-0"}}
	e.put(append(append([]byte(nil), raw...), '\n'), ma)
	if got := e.take(raw[:len(raw)-1]); got != nil {
		t.Error("other bytes took the echo")
	}
	if got := e.take(raw); got != ma {
		t.Fatalf("took %v, want the object put", got)
	}
	if got := e.take(raw); got != nil {
		t.Error("an echo was taken twice")
	}
	for i := range echoCapacity + 1 {
		e.put([]byte(fmt.Sprintf(`{"n":%d}`, i)), &v1alpha1.MetricAutoscaler{})
	}
	if e.take([]byte(`{"n":0}`)) != nil {
		t.Error("the oldest echo was kept past capacity")
	}
	if e.take([]byte(`{"n":1}`)) == nil || e.take([]byte(fmt.Sprintf(`{"n":%d}`, echoCapacity))) == nil {
		t.Error("a recent echo was dropped")
	}
	if len(e.byHash) != echoCapacity-2 {
		t.Errorf("%d echoes kept, want %d", len(e.byHash), echoCapacity-2)
	}
}

// BenchmarkWatchEvent: one watch event of a stored MetricAutoscaler through
// the REST client's watch decoding, with the generic JSON serializer and
// with the direct one.
func BenchmarkWatchEvent(b *testing.B) {
	const n = 1000
	stream := events(wire(b), n)
	for _, s := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"generic", codecs.WithoutConversion()}, {"direct", newNegotiated(codecs.WithoutConversion(), nil)}} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			var d *restclientwatch.Decoder
			i := n
			for b.Loop() {
				if i == n {
					d, i = watchDecoder(b, s.ns, stream), 0
				}
				if _, _, err := d.Decode(); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
