package convert

import (
	"net"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// redisServer is how a redis or redis-streams trigger reaches its
// server: redisServer's address, else redisHostPort's.
type redisServer struct {
	Address       string    `keda:"address,env"`
	Addresses     string    `keda:"addresses,env"`
	DatabaseIndex int       `keda:"databaseIndex"`
	EnableTLS     bool      `keda:"enableTLS"`
	UnsafeSSL     bool      `keda:"unsafeSsl"`
	Username      string    `keda:"username,env"`
	Password      secretRef `keda:"password"`
}

// redisMeta is what a redis (lists) trigger's metadata says besides the
// server.
type redisMeta struct {
	ListName             string             `keda:"listName,required,env"`
	ListLength           *resource.Quantity `keda:"listLength,threshold,default=5"`
	ActivationListLength *resource.Quantity `keda:"activationListLength"`
}

// redisHostPort is the server without an address.
type redisHostPort struct {
	Host string `keda:"host,required,env"`
	Port string `keda:"port,required,env"`
}

// redis: the length of a list (LLEN), one redis provider per server, user
// and database.
func (c *soConverter) redis(d *meta, t *KEDATrigger) *external {
	var m redisMeta
	if !d.decode(&m) {
		return nil
	}
	conn, password, ok := c.redisConn(d, t)
	if !ok {
		return nil
	}
	return &external{provider: "redis", conn: conn, target: m.ListLength, activ: m.ActivationListLength, authRef: true,
		entry:   c.metricEntry(map[string]any{"type": "listLength", "key": m.ListName}),
		secrets: []secretOption{password}}
}

// redisConn is the redis provider's connection options and password
// for a redis or redis-streams trigger; false when they do not convert.
func (c *soConverter) redisConn(d *meta, t *KEDATrigger) (map[string]any, secretOption, bool) {
	var m redisServer
	if !d.decode(&m) {
		return nil, secretOption{}, false
	}
	addr := m.Address
	if addr == "" {
		addr = m.Addresses
	}
	if addr == "" {
		var hp redisHostPort
		if !d.decode(&hp) {
			return nil, secretOption{}, false
		}
		addr = net.JoinHostPort(hp.Host, hp.Port)
	}
	if strings.Contains(addr, "@") {
		// never copied, nor quoted: it may hold a password
		d.fail("address", "the address holds credentials (user@ or user:password@), which are not copied: give host:port, and the password through passwordFromEnv or a TriggerAuthentication")
		return nil, secretOption{}, false
	}
	if strings.Contains(addr, ",") {
		d.fail("address", "several addresses (a cluster): the redis provider reads one standalone server")
		return nil, secretOption{}, false
	}
	conn := map[string]any{"address": addr}
	if m.DatabaseIndex != 0 {
		conn["db"] = m.DatabaseIndex
	}
	if m.EnableTLS {
		tls := map[string]any{}
		if m.UnsafeSSL {
			tls["insecureSkipVerify"] = true
		}
		conn["tls"] = tls
	}
	if m.Username != "" {
		conn["username"] = m.Username
	}
	return conn, c.password(d, t, m.Password, " (set username too if it has one)"), true
}
