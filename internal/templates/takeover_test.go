package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClusterAPINames(t *testing.T) {
	const stack, id = "kube-a1b2c", "bd71db63-28f3-4ac5-8e6e-d51a6470e5ff"
	left := ClusterAPILeftoversOf(stack, id)
	assert.Equal(t, []string{id, "kube-a1b2c-cloud-provider"}, left.ResourceSets)
	assert.Equal(t, []string{id, "kube-a1b2c-cloud-provider", "kube-a1b2c-ca", "kube-a1b2c-etcd", "kube-a1b2c-proxy", "kube-a1b2c-sa",
		"kube-a1b2c-cloud-config"}, left.Secrets, "the credential last")
	groups := []NodeGroup{{Name: "default-master", Role: "master"}, {Name: "default-worker", Role: "worker"}, {Name: "gpu", Role: "worker"}}
	assert.Equal(t, []string{"kube-a1b2c", "kube-a1b2c-default-worker", "kube-a1b2c-gpu"}, ClusterAPIServerGroupNames(stack, groups))
	marks := TakeOverMarks(stack, id)
	assert.Equal(t, map[string]string{LabelManagedBy: ManagedByValue, LabelClusterUUID: id}, marks.Labels)
	assert.Equal(t, map[string]string{AnnotationAdoptedFrom: "magnum-cluster-api"}, marks.Annotations)
	assert.Equal(t, []any{"Cluster", stack}, []any{marks.Kind, marks.Name})
}
