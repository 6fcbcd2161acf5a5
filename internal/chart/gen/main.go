// Command gen writes deploy/kubernetes/*.yaml from the Helm chart (go generate ./internal/chart).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/chart"
)

func main() {
	files, err := chart.KubernetesFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(chart.KubernetesDir(), name), []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}
