package convert

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// postgresqlMeta is what a postgresql trigger's metadata says; the server
// is the connection string's, else postgresqlServer's.
type postgresqlMeta struct {
	Connection                 string             `keda:"connection,env,hint=(its password is not copied: it becomes a file to mount), or set host, port, userName and dbName"`
	Password                   secretRef          `keda:"password"`
	Query                      string             `keda:"query,required,env"`
	TargetQueryValue           *resource.Quantity `keda:"targetQueryValue,threshold"`
	ActivationTargetQueryValue *resource.Quantity `keda:"activationTargetQueryValue"`
}

// postgresqlServer is the server without a connection string.
type postgresqlServer struct {
	Host     string `keda:"host,required,env"`
	UserName string `keda:"userName,required,env"`
	DBName   string `keda:"dbName,required,env"`
	Port     int    `keda:"port"`
	SSLMode  string `keda:"sslmode"`
}

// postgresql: the trigger's query, its first column of its first row as
// KEDA reads it, named value.
func (c *soConverter) postgresql(d *meta, t *KEDATrigger) *external {
	var m postgresqlMeta
	if !d.decode(&m) {
		return nil
	}
	conn := map[string]any{}
	password := c.password(d, t, m.Password, "")
	if m.Connection != "" {
		parsed, err := parsePostgresConnection(m.Connection)
		if err != nil {
			d.fail("connectionFromEnv", "%v", err)
			return nil
		}
		if parsed["password"] != nil {
			delete(parsed, "password")
			if password.value == nil {
				// the provider takes no password in its connection options:
				// a file to mount it at, never the value
				password.value = c.placeholder(d.field+".metadata.connection", "password", "the password in the connection string is not copied")
			}
		}
		conn = parsed
	} else {
		var s postgresqlServer
		if !d.decode(&s) {
			return nil
		}
		conn["host"], conn["user"], conn["database"] = s.Host, s.UserName, s.DBName
		if s.Port != 0 {
			conn["port"] = s.Port
		}
		if s.SSLMode != "" {
			conn["sslMode"] = s.SSLMode
		}
	}
	switch mode, _ := conn["sslMode"].(string); mode {
	case "", "disable", "prefer", "require", "verify-ca", "verify-full":
	case "allow":
		conn["sslMode"] = "prefer"
		d.warn("sslmode", "allow (plain first) becomes prefer (TLS first): the provider has no allow")
	default:
		d.fail("sslmode", "%q: want disable, allow, prefer, require, verify-ca or verify-full", mode)
		return nil
	}
	q := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m.Query), ";"))
	wrapped := "SELECT value FROM (" + q + ") AS keda_query(value) LIMIT 1"
	return &external{provider: "postgresql", conn: conn, target: m.TargetQueryValue, activ: m.ActivationTargetQueryValue, authRef: true,
		entry:   c.metricEntry(map[string]any{"query": wrapped}),
		secrets: []secretOption{password}}
}

// parsePostgresConnection reads host, port, user, database and sslmode
// from a libpq connection string (key=value or a postgres:// URL); a
// password in it is not returned, only "password": true says it is there.
// Errors never quote the string (it may hold the password).
func parsePostgresConnection(s string) (map[string]any, error) {
	out := map[string]any{}
	set := func(k, v string) error {
		switch k {
		case "host":
			out["host"] = v
		case "port":
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("the port is not a number")
			}
			out["port"] = n
		case "user":
			out["user"] = v
		case "dbname":
			out["database"] = v
		case "sslmode":
			out["sslMode"] = v
		case "password":
			if v != "" {
				out["password"] = true
			}
		}
		return nil
	}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("the connection URL does not parse")
		}
		if err := set("host", u.Hostname()); err != nil {
			return nil, err
		}
		if p := u.Port(); p != "" {
			if err := set("port", p); err != nil {
				return nil, err
			}
		}
		if u.User != nil {
			out["user"] = u.User.Username()
			if p, ok := u.User.Password(); ok && p != "" {
				out["password"] = true
			}
		}
		out["database"] = strings.TrimPrefix(u.Path, "/")
		if m := u.Query().Get("sslmode"); m != "" {
			out["sslMode"] = m
		}
	} else {
		for _, kv := range strings.Fields(s) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("a field of the connection string is not key=value")
			}
			if err := set(k, strings.Trim(v, "'")); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range []string{"host", "user", "database"} {
		if out[k] == nil || out[k] == "" {
			return nil, fmt.Errorf("the connection string has no %s", k)
		}
	}
	return out, nil
}
