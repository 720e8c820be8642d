// Command etcd runs the etcd server of go.etcd.io/etcd/server/v3 for the local test cluster.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
