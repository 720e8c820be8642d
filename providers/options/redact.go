package options

import (
	"fmt"
	"strings"
)

// Redacted is what a secret's value is shown as.
const Redacted = "[redacted]"

// Sensitive is a secret's value once read. It prints, logs and marshals
// as Redacted, so a value kept in a struct does not leak when the struct
// is logged (%v, %+v, klog) or printed as JSON; use string(s) where the
// value is really needed.
type Sensitive string

// String implements fmt.Stringer.
func (Sensitive) String() string { return Redacted }

// GoString implements fmt.GoStringer (%#v).
func (Sensitive) GoString() string { return Redacted }

// Format covers every verb, %s %q %v %x alike.
func (Sensitive) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// MarshalJSON implements json.Marshaler.
func (Sensitive) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler (YAML, logfmt).
func (Sensitive) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// Redact replaces every occurrence of each non-empty secret in msg, for a
// backend library's error that might echo a credential it was given.
func Redact(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, Redacted)
		}
	}
	return msg
}
