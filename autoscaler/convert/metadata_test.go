package convert

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

type testMeta struct {
	Host   string             `keda:"host,required,env,hint=(or set url)"`
	Port   int                `keda:"port"`
	TLS    bool               `keda:"tls,default=true"`
	Target *resource.Quantity `keda:"target,threshold,default=5"`
	Activ  *resource.Quantity `keda:"activation"`
	Pass   secretRef          `keda:"password"`
	Plain  string             `keda:"plain"`
	Skip   string             // not metadata
}

func TestMetaDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		md     map[string]string
		env    map[string]string
		auth   bool
		want   func(m testMeta) bool
		issues []string // "fatal field: reason part", in order
	}{
		{name: "defaults", md: map[string]string{"host": " h "},
			want: func(m testMeta) bool {
				return m.Host == "h" && m.Port == 0 && m.TLS && m.Target.String() == "5" && m.Activ == nil && !m.Pass.present
			}},
		{name: "all set", md: map[string]string{"host": "h", "port": "5432", "tls": "false", "target": "2.5", "activation": "1", "passwordFromEnv": "PW"},
			want: func(m testMeta) bool {
				return m.Port == 5432 && !m.TLS && m.Target.String() == "2500m" && m.Activ.String() == "1" && m.Pass == secretRef{present: true, env: "PW"}
			}},
		{name: "zero activation is none", md: map[string]string{"host": "h", "activation": "0"},
			want: func(m testMeta) bool { return m.Activ == nil }},
		{name: "from env", md: map[string]string{"hostFromEnv": "HOST"}, env: map[string]string{"HOST": "from-env"},
			want: func(m testMeta) bool { return m.Host == "from-env" }},
		{name: "env not given", md: map[string]string{"hostFromEnv": "HOST"},
			issues: []string{"true spec.triggers[0].metadata.hostFromEnv: HOST is an environment variable of the workload's container, which convert cannot read: give its value with --env HOST=VALUE (or set url)"}},
		{name: "required", md: map[string]string{},
			issues: []string{"true spec.triggers[0].metadata.host: required"}},
		{name: "required with an authenticationRef", md: map[string]string{}, auth: true,
			issues: []string{"true spec.triggers[0].metadata.host: missing: it may come from the trigger's TriggerAuthentication"}},
		{name: "every bad value, in field order", md: map[string]string{"host": "h", "port": "-1", "tls": "yes please", "target": "0", "activation": "x"},
			issues: []string{
				`true spec.triggers[0].metadata.port: "-1" is not a whole number of at least 0`,
				`true spec.triggers[0].metadata.tls: "yes please" is not true or false`,
				`true spec.triggers[0].metadata.target: "0": the target must be above 0`,
				`true spec.triggers[0].metadata.activation: "x" is not a number`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &soConverter{opts: KEDAOptions{Env: tt.env}}
			trig := &KEDATrigger{Metadata: tt.md}
			if tt.auth {
				trig.AuthenticationRef = &KEDAAuthRef{Name: "a"}
			}
			d := newMeta(c, 0, trig)
			var m testMeta
			ok := d.decode(&m)
			if ok != (len(tt.issues) == 0) {
				t.Errorf("decode %v with issues %v", ok, c.issues)
			}
			if len(c.issues) != len(tt.issues) {
				t.Fatalf("issues %v, want %d", c.issues, len(tt.issues))
			}
			for i, is := range c.issues {
				got := strings.Join([]string{map[bool]string{true: "true", false: "false"}[is.Fatal], is.Field + ": " + is.Reason}, " ")
				if !strings.HasPrefix(got, tt.issues[i]) {
					t.Errorf("issue %d: %q, want %q", i, got, tt.issues[i])
				}
			}
			if tt.want != nil && !tt.want(m) {
				t.Errorf("decoded %+v", m)
			}
		})
	}
}

func TestMetaLeftovers(t *testing.T) {
	t.Parallel()
	c := &soConverter{}
	d := newMeta(c, 2, &KEDATrigger{Metadata: map[string]string{"host": "h", "zeta": "1", "alpha": "2", "timeout": "3"}})
	var m testMeta
	d.decode(&m)
	d.ignore("timeout")
	d.leftovers()
	var got []string
	for _, is := range c.issues {
		if is.Fatal {
			t.Errorf("fatal %v", is)
		}
		got = append(got, is.Field)
	}
	if strings.Join(got, " ") != "spec.triggers[2].metadata.alpha spec.triggers[2].metadata.zeta" {
		t.Errorf("not-read keys reported %v, want alpha and zeta", got)
	}
}

func TestMetaTags(t *testing.T) {
	t.Parallel()
	for _, tag := range []string{"", "k,bogus", "k,default", "k,required=1"} {
		if _, err := parseMetaTag(tag); err == nil {
			t.Errorf("tag %q parsed", tag)
		}
	}
	if mt, err := parseMetaTag("k,env,hint=a, b, c"); err != nil || mt.hint != "a, b, c" || !mt.env {
		t.Errorf("hint with commas: %+v, %v", mt, err)
	}
}
