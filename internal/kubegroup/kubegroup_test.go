package kubegroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNames(t *testing.T) {
	assert.Equal(t, "keystone:project:p1", Project("p1"))
	assert.Equal(t, "keystone:project:p1:role:member", ProjectRole("p1", "Member"))
}
