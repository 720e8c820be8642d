package convert

import (
	"net"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// redisMeta is what a redis trigger's metadata says; the server is
// redisAddress's, else redisHostPort's.
type redisMeta struct {
	Address              string             `keda:"address,env"`
	Addresses            string             `keda:"addresses,env"`
	DatabaseIndex        int                `keda:"databaseIndex"`
	EnableTLS            bool               `keda:"enableTLS"`
	UnsafeSSL            bool               `keda:"unsafeSsl"`
	Username             string             `keda:"username,env"`
	Password             secretRef          `keda:"password"`
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
	addr := m.Address
	if addr == "" {
		addr = m.Addresses
	}
	if addr == "" {
		var hp redisHostPort
		if !d.decode(&hp) {
			return nil
		}
		addr = net.JoinHostPort(hp.Host, hp.Port)
	}
	if strings.Contains(addr, ",") {
		d.fail("address", "several addresses (a cluster): the redis provider reads one standalone server")
		return nil
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
	return &external{provider: "redis", conn: conn, target: m.ListLength, activ: m.ActivationListLength, authRef: true,
		entry:   c.metricEntry(map[string]any{"type": "listLength", "key": m.ListName}),
		secrets: []secretOption{c.password(d, t, m.Password, " (set username too if it has one)")}}
}
