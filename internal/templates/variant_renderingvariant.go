//go:build renderingvariant

package templates

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// RenderingVariant names what this build renders differently: the workers' kubeadm join names the
// container runtime's socket, a field that reaches the machines' bootstrap configuration.
const RenderingVariant = "workers' nodeRegistration.criSocket"

func init() {
	renderingVariant = func(class []*unstructured.Unstructured) {
		for _, o := range class {
			if o.GetKind() == "KubeadmConfigTemplate" {
				_ = unstructured.SetNestedField(o.Object, "unix:///run/containerd/containerd.sock",
					"spec", "template", "spec", "joinConfiguration", "nodeRegistration", "criSocket")
			}
		}
	}
}
