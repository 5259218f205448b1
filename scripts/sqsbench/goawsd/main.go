// Command goawsd serves goaws (github.com/Admiral-Piett/goaws, an
// in-memory SQS emulator) on one address, for scripts/sqsbench to compare
// Shoal's SQS API with. A module of its own, so goaws and its
// dependencies stay out of Shoal's go.mod.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/Admiral-Piett/goaws/app/servertest"
	log "github.com/sirupsen/logrus"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "host:port to serve on")
	flag.Parse()
	log.SetLevel(log.WarnLevel)
	srv, err := servertest.New(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(srv.URL()) // the bench reads where it listens
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	_ = srv.Quit()
}
