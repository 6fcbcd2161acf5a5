// Command labelsdoc writes docs/labels.md from the label registry of internal/templates:
//
//	go generate ./internal/templates    (runs: go run ./cmd/labelsdoc -o ../../docs/labels.md)
//
// A test in internal/templates fails when the committed file differs from what this writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

func main() {
	out := flag.String("o", "docs/labels.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, []byte(templates.LabelsMarkdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "labelsdoc:", err)
		os.Exit(1)
	}
}
