package magnum

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExceptions(t *testing.T) {
	cases := []struct {
		err     *Exception
		class   string
		code    int
		message string
		kwargs  map[string]any
	}{
		// The verbatim failure captured from a real conductor.
		{NotSupported("Signing in this capture"), "NotSupported", 400, "Signing in this capture is not supported.",
			map[string]any{"operation": "Signing in this capture", "code": 400}},
		{NotSupportedMessage("'rotate_ca_certificate' is not supported by this driver."), "NotSupported", 400,
			"'rotate_ca_certificate' is not supported by this driver.", map[string]any{"code": 400}},
		{InvalidParameterValue("node_count must be >= 1"), "InvalidParameterValue", 400, "node_count must be >= 1",
			map[string]any{"err": "node_count must be >= 1", "code": 400}},
		{Conflict(""), "Conflict", 409, "Conflict.", map[string]any{"code": 409}},
		{ClusterNotFound("c-1"), "ClusterNotFound", 404, "Cluster c-1 could not be found.", map[string]any{"cluster": "c-1", "code": 404}},
		{NodeGroupNotFound("ng-1"), "NodeGroupNotFound", 404, "Nodegroup ng-1 could not be found.", map[string]any{"nodegroup": "ng-1", "code": 404}},
		{ClusterTemplateNotFound("t"), "ClusterTemplateNotFound", 404, "ClusterTemplate t could not be found.", map[string]any{"clustertemplate": "t", "code": 404}},
		{X509KeyPairNotFound("k"), "X509KeyPairNotFound", 404, "A key pair k could not be found.", map[string]any{"x509keypair": "k", "code": 404}},
		{CertificateValidationError("subjectAltName"), "CertificateValidationError", 400, "Extension 'subjectAltName' not allowed", map[string]any{"extension": "subjectAltName", "code": 400}},
		{InvalidCsr("xyz"), "InvalidCsr", 400, "Received invalid csr xyz.", map[string]any{"csr": "xyz", "code": 400}},
		{AuthorizationFailure("keystone", "reason: expired"), "AuthorizationFailure", 403, "keystone connection failed. reason: expired",
			map[string]any{"client": "keystone", "message": "reason: expired", "code": 403}},
		{OperationInProgress("k8s"), "OperationInProgress", 400, "Cluster k8s already has an operation in progress.", map[string]any{"cluster_name": "k8s", "code": 400}},
		{NgOperationInProgress("ng"), "NgOperationInProgress", 400, "Nodegroup ng already has an operation in progress.", map[string]any{"nodegroup": "ng", "code": 400}},
		{NewMagnumException(""), "MagnumException", 500, "An unknown exception occurred.", map[string]any{"code": 500}},
		{ClusterAlreadyExists("u"), "ClusterAlreadyExists", 409, "A cluster with UUID u already exists.", map[string]any{"uuid": "u", "code": 409}},
		{NodeGroupAlreadyExists("ng", "c"), "NodeGroupAlreadyExists", 409, "A node group with name ng already exists in the cluster c.", map[string]any{"name": "ng", "cluster_id": "c", "code": 409}},
		{InvalidClusterTemplateForUpgrade("same template"), "InvalidClusterTemplateForUpgrade", 409, "Cluster Template is not valid for upgrade: same template", map[string]any{"reason": "same template", "code": 409}},
		{CertificateStorageException("disk full"), "CertificateStorageException", 500, "Could not store certificate: disk full", map[string]any{"msg": "disk full", "code": 500}},
		{CertificatesToClusterFailed("u"), "CertificatesToClusterFailed", 500, "Failed to create certificates for Cluster: u", map[string]any{"cluster_uuid": "u", "code": 500}},
	}
	for _, c := range cases {
		t.Run(c.class, func(t *testing.T) {
			assert.Equal(t, c.message, c.err.Error())
			assert.Equal(t, c.code, c.err.HTTPStatus())
			module, class, kwargs := c.err.OsloFailure()
			assert.Equal(t, "magnum.common.exception", module)
			assert.Equal(t, c.class, class)
			assert.Equal(t, c.kwargs, kwargs)
			// OsloFailure hands out a copy: the rpc layer may not change the error.
			kwargs["code"] = 999
			_, _, again := c.err.OsloFailure()
			assert.Equal(t, c.code, again["code"])
		})
	}
}

func TestExceptionHierarchy(t *testing.T) {
	var err error = fmt.Errorf("load cluster: %w", ClusterNotFound("c-1"))
	assert.True(t, errors.Is(err, ErrClusterNotFound))
	assert.True(t, errors.Is(err, ErrObjectNotFound), "ClusterNotFound is a ResourceNotFound is an ObjectNotFound")
	assert.True(t, errors.Is(err, ErrMagnumException))
	assert.False(t, errors.Is(err, ErrNodeGroupNotFound))
	assert.False(t, errors.Is(err, ErrInvalid))
	assert.True(t, errors.Is(InvalidCsr("x"), ErrInvalid))
	assert.True(t, errors.Is(ClusterAlreadyExists("u"), ErrConflict))
	assert.False(t, errors.Is(NotSupported("x"), ClusterNotFound("x")), "only class sentinels match by class")

	// The interface the rpc package looks for.
	var failure interface {
		OsloFailure() (string, string, map[string]any)
	}
	assert.True(t, errors.As(err, &failure))
}
