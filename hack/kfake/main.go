// Command kfake runs franz-go's in-memory fake Kafka cluster (pkg/kfake) on
// 127.0.0.1, for the kafka provider's end-to-end tests: no Kafka broker is
// packaged for Debian here. State (topics, records, committed offsets) lives
// in memory only: a restart starts an empty cluster.
//
//	kfake -port 19092 -partitions 3
//
// It prints "ready" on stdout once it listens and runs until SIGTERM or
// SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 19092, "port to listen on, on 127.0.0.1")
	partitions := flag.Int("partitions", 3, "partitions of a topic created without a count (auto-created or -1)")
	flag.Parse()
	if *port < 1 || *port > 65535 {
		fmt.Fprintf(os.Stderr, "kfake: -port %d: must be 1-65535\n", *port)
		os.Exit(2)
	}
	if *partitions < 1 {
		fmt.Fprintf(os.Stderr, "kfake: -partitions %d: must be at least 1\n", *partitions)
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(*port),
		kfake.DefaultNumPartitions(*partitions),
		kfake.AllowAutoTopicCreation(),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: starting the cluster on 127.0.0.1:%d: %v\n", *port, err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", c.ListenAddrs()[0])
	s := <-sig
	fmt.Printf("stopping on %s\n", s)
	c.Close()
}
