// Package changefeed is the wire format of the adapter's change feed: the
// adapter tells its subscribers (the autoscaler) which series of which
// metrics changed, so that an autoscaler reading one is reconciled at once
// instead of at its next sync period. It is the protocol only, with no
// dependency, shared by the adapter (adapter/changehub, which serves it) and
// the autoscaler (autoscaler/feedclient, which reads it). It sits under
// providers, beside the providers.Change it carries, so that neither program
// imports the other.
//
//	GET /changes                       on the adapter's secure port
//	Authorization: Bearer <token>      authorized as the non-resource URL /changes, verb get
//
// The answer is a stream of JSON objects, one per line (Content-Type
// application/x-ndjson), that lasts until either side closes it:
//
//	{"type":"hello","heartbeatSeconds":10,"replica":"5f0c9a1e7b2d4c38"}
//	{"type":"change","name":"queue_messages_ready","namespace":"shop","labels":{"namespace":"shop","queue":"orders"}}
//	{"type":"change","name":"queue_messages_ready","all":true}
//	{"type":"resync"}
//	{"type":"heartbeat"}
//	{"type":"covered","kind":"external","name":"redis_list_length","leaseSeconds":120,"maxAgeMillis":1000}
//	{"type":"uncovered","kind":"external","name":"redis_list_length"}
//
// hello comes first, once the subscription exists: anything that changes
// after it is announced. replica names the adapter process serving the
// feed; the same process names itself in the ReplicaHeader of every answer
// it serves, metric reads included. A change names a metric and the labels of the series
// whose value changed (or appeared, or went away); all means every series of
// the metric, sent instead of many label sets. kind, when set, limits it to
// one metrics API ("external" or "custom"); empty means both. namespace is
// the namespace the series belongs to ("" for a series of every namespace).
// resync means changes were dropped (a slow reader): the reader must treat
// every metric as changed. heartbeat comes every heartbeatSeconds when
// nothing else does, so a reader that hears nothing for a few of them knows
// the connection is dead.
//
// A change is a hint, never a value: a reader reads the metric through the
// metrics APIs as usual. Spurious changes are allowed, a missed one never
// (short of a resync or a reconnect, after which everything is stale).
//
// covered says the adapter announces, from now on, every change of every
// series of the metric within maxAgeMillis (a polled backend's metric while
// it is polled and its reads succeed), and that a reading any replica serves
// is at most maxAgeMillis old; it holds until uncovered, a resync or the end
// of the connection, and while the metric is queried at least every
// leaseSeconds. A reader may then reuse a value, instead of reading it
// again, if it began to read it after the covered event and after the last
// change it heard of the series, and either at least maxAgeMillis after
// both or from the feed's own replica (the answer's ReplicaHeader is the
// hello's replica): a replica answers a query that reaches it after it
// announced a change with the changed value or a newer one. uncovered comes
// with a change of every series (a failed read, or the poll's end): read
// again. After hello and after a resync come a covered event for each
// metric covered then. Pushed metrics are never covered: they are read at
// every sync.
package changefeed

// Path is where the adapter serves the feed, and the non-resource URL RBAC
// grants (verb get).
const Path = "/changes"

// ReplicaHeader is the answer header in which an adapter serving a feed
// names its process (the hello's replica).
const ReplicaHeader = "Metricscale-Replica"

// ContentType is the feed's media type.
const ContentType = "application/x-ndjson"

// Event types.
const (
	TypeHello     = "hello"
	TypeChange    = "change"
	TypeResync    = "resync"
	TypeHeartbeat = "heartbeat"
	TypeCovered   = "covered"
	TypeUncovered = "uncovered"
)

// Metric API kinds a change may be limited to.
const (
	KindExternal = "external"
	KindCustom   = "custom"
)

// Event is one line of the feed.
type Event struct {
	Type string `json:"type"`
	// Kind limits a change to one metrics API; empty: both.
	Kind string `json:"kind,omitempty"`
	// Namespace is the series' namespace; empty: visible from every
	// namespace (External) or not namespaced.
	Namespace string `json:"namespace,omitempty"`
	// Name is the metric name.
	Name string `json:"name,omitempty"`
	// Labels are the changed series' labels (with its namespace label,
	// if any); ignored when All.
	Labels map[string]string `json:"labels,omitempty"`
	// All: every series of the metric (in Namespace, if set) changed.
	All bool `json:"all,omitempty"`
	// HeartbeatSeconds (hello only) is the server's heartbeat interval.
	HeartbeatSeconds int `json:"heartbeatSeconds,omitempty"`
	// Replica (hello only) names the adapter process serving the feed, as
	// its answers' ReplicaHeader does.
	Replica string `json:"replica,omitempty"`
	// LeaseSeconds (covered only): the coverage lasts while the metric is
	// queried at least this often.
	LeaseSeconds int `json:"leaseSeconds,omitempty"`
	// MaxAgeMillis (covered only): how late a change is announced, and how
	// old a reading a replica serves may be.
	MaxAgeMillis int64 `json:"maxAgeMillis,omitempty"`
}

// MatchesKind reports whether the change concerns the metrics API kind
// (KindExternal or KindCustom).
func (e *Event) MatchesKind(kind string) bool { return e.Kind == "" || e.Kind == kind }
