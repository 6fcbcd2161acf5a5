package conductor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/compute"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

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

// ErrDatabase marks a failure of Magnum's database (the Store wraps its errors with it), so the
// reason a tenant reads says which service failed without the driver's message.
var ErrDatabase = errors.New("database error")

// The retry policy: permanent errors (bad input, objects the apiserver or Keystone refuse, things
// that do not exist) fail the operation at once; everything else — connections refused, timeouts,
// 5xx, 409 conflicts, the database restarting — is transient and retried with backoff until the
// operation's deadline.

// permanent tells errors retrying cannot fix from transient ones.
func permanent(err error) bool {
	var le *templates.LabelError
	var ve *templates.VersionError
	if errors.As(err, &le) || errors.As(err, &ve) || meta.IsNoMatchError(err) {
		return true
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return true
	}
	var me *magnum.Exception
	if errors.As(err, &me) {
		return true
	}
	// Barbican refusing the service user or a request does not change with retries (an unreachable
	// Barbican, a 5xx or a missing container may).
	var be *barbican.Error
	if errors.As(err, &be) && (be.Status == http.StatusBadRequest || be.Status == http.StatusUnauthorized || be.Status == http.StatusForbidden) {
		return true
	}
	// 403 and 401 from the apiserver are not here: an apiserver that just started answers them until
	// its RBAC and authentication caches are filled (seen in the fault matrix after a restart), so
	// they are retried — a real RBAC mistake still ends the operation at its deadline, with the reason.
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) ||
		apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// permanentError marks an error no retry can fix. Its message is written for the tenant.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// reasonFor is the status_reason a tenant reads for err. Refusals written for tenants (label
// errors, Magnum exceptions, the bridge's own permanent refusals, the apiserver rejecting the
// cluster's objects) keep their words, without endpoints; anything else becomes the failing
// service and an error id, and the full error goes to the bridge log under that id — internal
// URLs, hostnames and driver messages stay with the operator.
func (c *Conductor) reasonFor(cluster string, err error) string {
	if msg, ok := tenantMessage(err); ok {
		return redactEndpoints(msg)
	}
	id := errorID()
	c.log.Error("operation error; the tenant's status_reason carries its id", "error_id", id, "cluster", cluster, "error", err)
	return fmt.Sprintf("%s (error id %s; the cloud operator finds the details in the magnum-capi-bridge log)", serviceFailure(err), id)
}

func tenantMessage(err error) (string, bool) {
	var le *templates.LabelError
	if errors.As(err, &le) {
		return le.Error(), true
	}
	var ve *templates.VersionError
	if errors.As(err, &ve) {
		return ve.Error(), true
	}
	var me *magnum.Exception
	if errors.As(err, &me) {
		return me.Message, true
	}
	var re *rpc.RemoteError
	if errors.As(err, &re) {
		return re.Message, true
	}
	if meta.IsNoMatchError(err) {
		return "the management cluster does not serve the Cluster API resources this cluster needs; ask your cloud operator", true
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return "the management cluster refused the cluster's objects: " + st.Status().Message, true
		}
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return pe.Error(), true
	}
	return "", false
}

// serviceFailure names the service behind a transient or unexpected error.
func serviceFailure(err error) string {
	var be *barbican.Error
	var ke *keystone.Error
	var ce *compute.Error
	var st apierrors.APIStatus
	var ue *url.Error
	switch {
	case errors.As(err, &be):
		return "the key manager (Barbican) failed: " + be.Brief()
	case errors.As(err, &ke):
		return "the identity service (Keystone) failed"
	case errors.As(err, &ce):
		return "the compute service (Nova) failed"
	case errors.Is(err, ErrDatabase):
		return "Magnum's database failed"
	case errors.As(err, &st), errors.As(err, &ue):
		return "the management cluster failed"
	}
	return "internal error"
}

var (
	endpointPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"',;]+`)
	addressPattern  = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b`)
)

// redactEndpoints removes URLs and IP addresses from a message meant for a tenant.
func redactEndpoints(msg string) string {
	msg = endpointPattern.ReplaceAllString(msg, "<endpoint>")
	return addressPattern.ReplaceAllString(msg, "<address>")
}

func errorID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
