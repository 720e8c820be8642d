package options

import (
	"errors"
	"fmt"
	"strings"
)

// Redacted is what a secret's value is shown as.
const Redacted = "REDACTED"

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

// Redact removes each non-empty secret from err's message, for a backend
// client's error that might echo a credential it was given (some build
// their messages from the connection URL). errors.Is still sees the cause
// (a context's deadline, say); errors.As does not, as its message would
// hold the secret.
func Redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, Redacted)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return redacted{msg: msg, cause: err}
}

type redacted struct {
	msg   string
	cause error
}

func (r redacted) Error() string { return r.msg }

// Is keeps errors.Is working for context errors without exposing the text.
func (r redacted) Is(target error) bool { return errors.Is(r.cause, target) }
