package conductor

import "github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"

// Magnum's own exception classes (magnum.common.exception), so magnum-api answers the HTTP status a
// user expects instead of a 500.

func authorizationFailure(msg string) error {
	return magnum.AuthorizationFailure("magnum-capi-bridge", msg)
}
func clusterNotFound(uuid string) error { return magnum.ClusterNotFound(uuid) }
func invalidParameter(msg string) error { return magnum.InvalidParameterValue(msg) }
func invalidCSR(msg string) error       { return magnum.InvalidCsr(msg) }
func certificateValidation(msg string) error {
	return magnum.CertificateValidationError(msg)
}
