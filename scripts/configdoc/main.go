// Command configdoc writes docs/CONFIG.md from the broker's config tables:
//
//	go generate ./broker     # or: go run ./scripts/configdoc -out docs/CONFIG.md
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/shoal-mq/shoal/broker"
)

func main() {
	out := flag.String("out", "docs/CONFIG.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, []byte(broker.ConfigReference()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}
