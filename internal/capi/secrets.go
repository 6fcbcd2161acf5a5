package capi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadSecret returns a Secret's data straight from the apiserver (the bridge caches no Secrets);
// found is false when the Secret does not exist.
func (c *Client) ReadSecret(ctx context.Context, namespace, name string) (map[string][]byte, bool, error) {
	var s corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return s.Data, true, nil
}
