package cluster

import (
	"strings"
	"testing"
)

func TestCRDEstablished(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, json string
		want       bool
		wantWhy    string
	}{
		{"established", `{"status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":"True"}]}}`, true, ""},
		{"no status yet", `{"metadata":{"name":"x"}}`, false, "no conditions yet"},
		{"names conflict", `{"status":{"conditions":[{"type":"NamesAccepted","status":"False","reason":"ListKindConflict","message":"taken"},{"type":"Established","status":"False"}]}}`, false, "NamesAccepted=False (ListKindConflict: taken)"},
		{"not JSON", `error: the server is currently unable`, false, "reading the CRD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, why := crdEstablished([]byte(tt.json))
			if got != tt.want || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("crdEstablished = %v, %q; want %v, containing %q", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}
