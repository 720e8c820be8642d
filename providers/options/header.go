package options

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
)

// Header is the value of an HTTP header set on every request to a backend:
// a plain string in the config ("X-Scope-OrgID": "tenant-a"), or, for a
// header that carries a credential, a Secret
// ("Authorization": {file: /var/run/secrets/prom/authorization}) whose
// content is the whole header value.
type Header struct {
	Value  string
	Secret *Secret
}

// UnmarshalJSON accepts a string or {file|env}.
func (h *Header) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var s Secret
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*h = Header{Secret: &s}
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New("want a string, or {file: ...} or {env: ...} for a credential")
	}
	*h = Header{Value: v}
	return nil
}

// MarshalJSON writes what UnmarshalJSON reads: the source of a secret
// header, never its value.
func (h Header) MarshalJSON() ([]byte, error) {
	if h.Secret != nil {
		return json.Marshal(h.Secret)
	}
	return json.Marshal(h.Value)
}

// credentialHeaders are the headers whose value is a credential whatever
// the backend; others are told by their name (credentialWords).
var credentialHeaders = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
}

var credentialWords = []string{"auth", "token", "key", "secret", "password", "passwd", "session", "credential", "signature"}

// IsCredentialHeader says whether a header named name carries a
// credential, so its value must come from a Secret: Authorization,
// Proxy-Authorization, Cookie, and any header whose name says so
// (X-API-Key, X-Auth-Token, ...).
func IsCredentialHeader(name string) bool {
	if credentialHeaders[http.CanonicalHeaderKey(name)] {
		return true
	}
	lower := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// CheckHeaders validates headers (field is their config path): valid
// names, a credential header only from a Secret (an inline one would sit
// in a ConfigMap and in every printed config), a secret's source valid.
func CheckHeaders(field string, headers map[string]Header, errs *Errors) {
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		h := headers[k]
		f := field + "." + k
		switch {
		case k == "" || strings.ContainsAny(k, " :\r\n\t"):
			errs.Add(field, "invalid header name %q", k)
		case h.Secret != nil:
			if !h.Secret.IsSet() {
				errs.Add(f, "set file or env")
			}
			h.Secret.Validate(f, errs)
		case IsCredentialHeader(k):
			errs.Add(f, "carries a credential: an inline value is refused; give {file: /path} (a mounted Secret) or {env: VARIABLE} holding the whole header value")
		case strings.ContainsAny(h.Value, "\r\n"):
			errs.Add(f, "value must not contain a line break")
		}
	}
}
