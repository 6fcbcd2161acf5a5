package addons

import (
	"testing"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// BenchmarkRender is one create's add-on rendering (after its Cluster is applied): calico with the
// OpenStack add-ons, and the in-memory flavor's set (CNI and metrics-server only).
func BenchmarkRender(b *testing.B) {
	for _, c := range []struct {
		name string
		in   Input
	}{
		{"openstack-calico", input()},
		{"inmemory-calico", input(func(in *Input) { in.Flavor, in.Cloud = templates.FlavorInMemory, nil })},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
