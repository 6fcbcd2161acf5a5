package conductor

import (
	"cmp"
	"context"
	"errors"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// clusterForCall loads the stored row of the cluster a call or cast names — the row, not the
// message, is the truth for the project and the certificate refs — and refuses another driver's.
func (c *Conductor) clusterForCall(ctx context.Context, req *rpc.Request) (*magnum.Cluster, error) {
	arg := &magnum.Cluster{}
	if err := c.decodeView(req, "cluster", arg); err != nil {
		return nil, err
	}
	id := arg.UUID.Or("")
	cl, err := c.store.GetCluster(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, clusterNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if err := authorize(req.Context, cl.ProjectID.Or("")); err != nil {
		return nil, err
	}
	if err := c.refuseForeign(ctx, cl); err != nil {
		return nil, err
	}
	return cl, nil
}

// GetCACertificate implements get_ca_certificate(cluster, ca_cert_type): the CA's PEM in a
// Certificate object (`openstack coe ca show`, the first half of `coe cluster config`).
func (c *Conductor) GetCACertificate(ctx context.Context, req *rpc.Request) (any, error) {
	cl, err := c.clusterForCall(ctx, req)
	if err != nil {
		return nil, err
	}
	caType, err := stringArg(req, "ca_cert_type")
	if err != nil {
		return nil, err
	}
	ca, err := c.certs.LoadCA(ctx, refsOf(cl), caType)
	if err != nil {
		return nil, certError(err)
	}
	cert := &magnum.Certificate{}
	cert.ProjectID.Set(cl.ProjectID.Or(""))
	cert.UserID.Set(cl.UserID.Or(""))
	cert.ClusterUUID.Set(cl.UUID.Or(""))
	cert.PEM.Set(ca.Certificate)
	return magnum.Encode(cert, c.opts.Versions)
}

// SignCertificate implements sign_certificate(cluster, certificate): the CSR signed by the
// cluster's CA (the second half of `coe cluster config`, and Terraform's kubeconfig).
func (c *Conductor) SignCertificate(ctx context.Context, req *rpc.Request) (any, error) {
	cl, err := c.clusterForCall(ctx, req)
	if err != nil {
		return nil, err
	}
	cert := &magnum.Certificate{}
	if err := c.decodeView(req, "certificate", cert); err != nil {
		return nil, err
	}
	issuer := cmp.Or(cl.Name.Or(""), cl.UUID.Or(""))
	pem, err := c.certs.SignCSR(ctx, refsOf(cl), cert.CACertType.Or(""), issuer, cert.CSR.Or(""), c.opts.Sign)
	if err != nil {
		return nil, certError(err)
	}
	cert.PEM.Set(pem)
	return magnum.Encode(cert, c.opts.Versions)
}

// certError maps certificate failures to the Magnum exceptions the API turns into 4xx, and a
// failed key manager to a 500 that names it and the container (the operator finds the rest in the
// log under the same words).
func certError(err error) error {
	var be *barbican.Error
	switch {
	case errors.As(err, &be):
		return magnum.NewMagnumException("The key manager (Barbican) failed: " + be.Brief())
	case errors.Is(err, certs.ErrInvalidCSR):
		return invalidCSR(err.Error())
	case errors.Is(err, certs.ErrCertificateValidation):
		return certificateValidation(err.Error())
	case errors.Is(err, certs.ErrUnknownCAType):
		return invalidParameter(err.Error())
	case errors.Is(err, certs.ErrMissingRef), errors.Is(err, certs.ErrKeyPairNotFound):
		return magnum.Conflict("The cluster's certificates are not ready yet: " + err.Error())
	}
	return err
}
