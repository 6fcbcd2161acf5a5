package magnum

import (
	"fmt"
	"maps"
	"net/http"
)

// ExceptionModule is the module magnum-api allows remote exceptions from
// (allowed_remote_exmods); a failure naming another module becomes RemoteError, i.e. HTTP 500.
const ExceptionModule = "magnum.common.exception"

// Exception is a magnum.common.exception error. The rpc package sends any error with an
// OsloFailure method as an oslo failure; magnum-api rebuilds the class from module, class and
// kwargs and answers with kwargs["code"] as the HTTP status.
type Exception struct {
	// Class is the Python class name, e.g. "ClusterNotFound".
	Class string
	// Code is the HTTP status the API returns.
	Code int
	// Message is the formatted message, as Python's str(exc).
	Message string
	// Kwargs are the constructor's keyword arguments (the message's format values), without code.
	Kwargs map[string]any
}

func (e *Exception) Error() string { return e.Message }

// OsloFailure names the class for the oslo failure payload: module, class and the kwargs the
// Python constructor gets, "code" included (MagnumException puts it there itself).
func (e *Exception) OsloFailure() (module, class string, kwargs map[string]any) {
	kw := make(map[string]any, len(e.Kwargs)+1)
	maps.Copy(kw, e.Kwargs)
	kw["code"] = e.Code
	return ExceptionModule, e.Class, kw
}

// HTTPStatus is the status magnum-api answers with.
func (e *Exception) HTTPStatus() int { return e.Code }

// Is matches class sentinels (ErrClusterNotFound …) along Magnum's class hierarchy, so
// errors.Is(err, ErrObjectNotFound) holds for a ClusterNotFound.
func (e *Exception) Is(target error) bool {
	t, ok := target.(*Exception)
	if !ok || t.Message != "" {
		return false
	}
	for c := e.Class; c != ""; c = exceptionParents[c] {
		if c == t.Class {
			return true
		}
	}
	return false
}

// exceptionParents mirrors the Python class tree for the classes defined here.
var exceptionParents = map[string]string{
	"ObjectNotFound":                   "MagnumException",
	"ResourceNotFound":                 "ObjectNotFound",
	"ClusterNotFound":                  "ResourceNotFound",
	"ClusterTemplateNotFound":          "ResourceNotFound",
	"NodeGroupNotFound":                "ResourceNotFound",
	"X509KeyPairNotFound":              "ResourceNotFound",
	"Invalid":                          "MagnumException",
	"InvalidParameterValue":            "Invalid",
	"InvalidCsr":                       "Invalid",
	"CertificateValidationError":       "Invalid",
	"OperationInProgress":              "Invalid",
	"NgOperationInProgress":            "Invalid",
	"NotSupported":                     "MagnumException",
	"Conflict":                         "MagnumException",
	"ClusterAlreadyExists":             "Conflict",
	"NodeGroupAlreadyExists":           "Conflict",
	"InvalidClusterTemplateForUpgrade": "Conflict",
	"AuthorizationFailure":             "MagnumException",
	"CertificateStorageException":      "MagnumException",
	"CertificatesToClusterFailed":      "MagnumException",
	"MagnumException":                  "",
}

// Class sentinels for errors.Is.
var (
	ErrMagnumException         = &Exception{Class: "MagnumException"}
	ErrObjectNotFound          = &Exception{Class: "ObjectNotFound"}
	ErrClusterNotFound         = &Exception{Class: "ClusterNotFound"}
	ErrClusterTemplateNotFound = &Exception{Class: "ClusterTemplateNotFound"}
	ErrNodeGroupNotFound       = &Exception{Class: "NodeGroupNotFound"}
	ErrX509KeyPairNotFound     = &Exception{Class: "X509KeyPairNotFound"}
	ErrInvalid                 = &Exception{Class: "Invalid"}
	ErrNotSupported            = &Exception{Class: "NotSupported"}
	ErrConflict                = &Exception{Class: "Conflict"}
	ErrAuthorizationFailure    = &Exception{Class: "AuthorizationFailure"}
)

func newException(class string, code int, message string, kwargs map[string]any) *Exception {
	if kwargs == nil {
		kwargs = map[string]any{}
	}
	return &Exception{Class: class, Code: code, Message: message, Kwargs: kwargs}
}

// Constructors: each formats the message exactly as the Python class's `message % kwargs` does
// (magnum/common/exception.py, Zed and unchanged since).

// NewMagnumException is the base class (500); an empty message gives Python's default.
func NewMagnumException(message string) *Exception {
	if message == "" {
		message = "An unknown exception occurred."
	}
	return newException("MagnumException", http.StatusInternalServerError, message, nil)
}

// NotSupported: "%(operation)s is not supported." (400).
func NotSupported(operation string) *Exception {
	return newException("NotSupported", http.StatusBadRequest, operation+" is not supported.",
		map[string]any{"operation": operation})
}

// NotSupportedMessage is NotSupported with an explicit message, as Python's
// NotSupported("'rotate_ca_certificate' is not supported by this driver.").
func NotSupportedMessage(message string) *Exception {
	return newException("NotSupported", http.StatusBadRequest, message, nil)
}

// InvalidParameterValue: "%(err)s" (400).
func InvalidParameterValue(err string) *Exception {
	return newException("InvalidParameterValue", http.StatusBadRequest, err, map[string]any{"err": err})
}

// Conflict: "Conflict." or the given message (409).
func Conflict(message string) *Exception {
	if message == "" {
		message = "Conflict."
	}
	return newException("Conflict", http.StatusConflict, message, nil)
}

// ClusterNotFound: "Cluster %(cluster)s could not be found." (404).
func ClusterNotFound(cluster string) *Exception {
	return newException("ClusterNotFound", http.StatusNotFound,
		fmt.Sprintf("Cluster %s could not be found.", cluster), map[string]any{"cluster": cluster})
}

// ClusterTemplateNotFound: "ClusterTemplate %(clustertemplate)s could not be found." (404).
func ClusterTemplateNotFound(clusterTemplate string) *Exception {
	return newException("ClusterTemplateNotFound", http.StatusNotFound,
		fmt.Sprintf("ClusterTemplate %s could not be found.", clusterTemplate),
		map[string]any{"clustertemplate": clusterTemplate})
}

// NodeGroupNotFound: "Nodegroup %(nodegroup)s could not be found." (404).
func NodeGroupNotFound(nodegroup string) *Exception {
	return newException("NodeGroupNotFound", http.StatusNotFound,
		fmt.Sprintf("Nodegroup %s could not be found.", nodegroup), map[string]any{"nodegroup": nodegroup})
}

// X509KeyPairNotFound: "A key pair %(x509keypair)s could not be found." (404).
func X509KeyPairNotFound(keypair string) *Exception {
	return newException("X509KeyPairNotFound", http.StatusNotFound,
		fmt.Sprintf("A key pair %s could not be found.", keypair), map[string]any{"x509keypair": keypair})
}

// ClusterAlreadyExists: "A cluster with UUID %(uuid)s already exists." (409).
func ClusterAlreadyExists(uuid string) *Exception {
	return newException("ClusterAlreadyExists", http.StatusConflict,
		fmt.Sprintf("A cluster with UUID %s already exists.", uuid), map[string]any{"uuid": uuid})
}

// NodeGroupAlreadyExists: "A node group with name %(name)s already exists in the cluster
// %(cluster_id)s." (409).
func NodeGroupAlreadyExists(name, clusterID string) *Exception {
	return newException("NodeGroupAlreadyExists", http.StatusConflict,
		fmt.Sprintf("A node group with name %s already exists in the cluster %s.", name, clusterID),
		map[string]any{"name": name, "cluster_id": clusterID})
}

// CertificateValidationError: "Extension '%(extension)s' not allowed" (400).
func CertificateValidationError(extension string) *Exception {
	return newException("CertificateValidationError", http.StatusBadRequest,
		fmt.Sprintf("Extension '%s' not allowed", extension), map[string]any{"extension": extension})
}

// InvalidCsr: "Received invalid csr %(csr)s." (400).
func InvalidCsr(csr string) *Exception {
	return newException("InvalidCsr", http.StatusBadRequest,
		fmt.Sprintf("Received invalid csr %s.", csr), map[string]any{"csr": csr})
}

// AuthorizationFailure: "%(client)s connection failed. %(message)s" (403).
func AuthorizationFailure(client, message string) *Exception {
	return newException("AuthorizationFailure", http.StatusForbidden,
		fmt.Sprintf("%s connection failed. %s", client, message), map[string]any{"client": client, "message": message})
}

// OperationInProgress: "Cluster %(cluster_name)s already has an operation in progress." (400,
// an Invalid).
func OperationInProgress(clusterName string) *Exception {
	return newException("OperationInProgress", http.StatusBadRequest,
		fmt.Sprintf("Cluster %s already has an operation in progress.", clusterName),
		map[string]any{"cluster_name": clusterName})
}

// NgOperationInProgress: "Nodegroup %(nodegroup)s already has an operation in progress." (400).
func NgOperationInProgress(nodegroup string) *Exception {
	return newException("NgOperationInProgress", http.StatusBadRequest,
		fmt.Sprintf("Nodegroup %s already has an operation in progress.", nodegroup),
		map[string]any{"nodegroup": nodegroup})
}

// InvalidClusterTemplateForUpgrade: "Cluster Template is not valid for upgrade: %(reason)s" (409).
func InvalidClusterTemplateForUpgrade(reason string) *Exception {
	return newException("InvalidClusterTemplateForUpgrade", http.StatusConflict,
		"Cluster Template is not valid for upgrade: "+reason, map[string]any{"reason": reason})
}

// CertificateStorageException: "Could not store certificate: %(msg)s" (500).
func CertificateStorageException(msg string) *Exception {
	return newException("CertificateStorageException", http.StatusInternalServerError,
		"Could not store certificate: "+msg, map[string]any{"msg": msg})
}

// CertificatesToClusterFailed: "Failed to create certificates for Cluster: %(cluster_uuid)s" (500).
func CertificatesToClusterFailed(clusterUUID string) *Exception {
	return newException("CertificatesToClusterFailed", http.StatusInternalServerError,
		"Failed to create certificates for Cluster: "+clusterUUID, map[string]any{"cluster_uuid": clusterUUID})
}
