// Command coredns is CoreDNS with only the plugins the local cluster's real node uses
// (--real-node): the kubernetes plugin for the cluster's Service and pod names, forward
// to the host's resolvers, bind (the host's address), and the usual health, ready, cache,
// loop, loadbalance, errors and log plugins.
// Importing coremain alone registers none; each import below registers one, which keeps
// the build much smaller than CoreDNS's own command with its every plugin.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
