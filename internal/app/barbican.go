package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
)

// certBackend is where the bridge keeps clusters' key pairs: [certificates] cert_manager_type.
// countError, if set, counts Barbican's failed requests (metrics).
func certBackend(o *Options, st store, countError func()) (certs.Backend, error) {
	if b := o.Barbican; b != nil {
		backend, err := newBarbican(b, countError)
		if err != nil {
			return nil, err
		}
		return barbicanCerts{Backend: backend, st: st.Store}, nil
	}
	return st.KeyPairs(), nil
}

func newBarbican(o *BarbicanOptions, countError func()) (*barbican.Backend, error) {
	// The service user's own TLS settings, as its Keystone client would apply them.
	hc, err := keystone.HTTPClient(o.Service.CAFile, o.Service.Insecure)
	if err != nil {
		return nil, err
	}
	if countError != nil {
		hc.Transport = countingTransport{next: hc.Transport, count: countError}
	}
	return barbican.New(barbican.Options{Service: o.Service, Region: o.Region, Interface: o.Interface, Dialect: o.Dialect, HTTPClient: hc}), nil
}

// barbicanCerts is the barbican certificate backend: key pairs in Barbican, a cluster's set
// referred to by its row in Magnum's database.
type barbicanCerts struct {
	*barbican.Backend
	st *db.Store
}

var _ certs.ClusterSetStore = barbicanCerts{}

// refColumns are the cluster columns of a set, in certs.Refs order.
var refColumns = []string{"ca_cert_ref", "etcd_ca_cert_ref", "front_proxy_ca_cert_ref", "magnum_cert_ref"}

func refsOfRow(c *db.Cluster) certs.Refs {
	v := c.View()
	return certs.Refs{CACertRef: v.CACertRef.Or(""), EtcdCACertRef: v.EtcdCACertRef.Or(""),
		FrontProxyCACertRef: v.FrontProxyCACertRef.Or(""), MagnumCertRef: v.MagnumCertRef.Or(""), ClusterUUID: v.UUID.Or("")}
}

func complete(r certs.Refs) bool {
	return r.CACertRef != "" && r.EtcdCACertRef != "" && r.FrontProxyCACertRef != "" && r.MagnumCertRef != ""
}

// StoreClusterSet implements certs.ClusterSetStore. Barbican names the containers, so the set
// cannot go in with the row's refs in one transaction. Instead: a row that refers to a complete set
// already keeps it; otherwise the four containers are written, then the row's refs are set only if
// they are still unset; and every failure on the way removes the containers written, so no attempt
// leaves a partial set or one no cluster refers to. When Barbican went away half-way and the
// removal fails too, the next store (the create's retry, or any other) removes them first. Only an
// attempt killed between its first secret and the row update leaves containers unreferred in the
// service project, as Magnum's conductor would.
func (b barbicanCerts) StoreClusterSet(ctx context.Context, clusterUUID string, pki *certs.ClusterPKI, owner certs.Owner) (certs.Refs, bool, error) {
	row, err := b.st.GetCluster(ctx, clusterUUID)
	if err != nil {
		return certs.Refs{}, false, notFound(err)
	}
	if refs := refsOfRow(row); complete(refs) {
		return refs, false, nil
	}
	items := []struct {
		name string
		kp   certs.KeyPair
	}{
		{pki.Issuer, pki.KubernetesCA.Stored}, {pki.Issuer, pki.EtcdCA.Stored},
		{pki.Issuer, pki.FrontProxyCA.Stored}, {certs.ClientCertName, pki.MagnumClient.Stored},
	}
	written := make([]string, 0, len(items))
	removeWritten := func(cause error) error {
		for _, ref := range written {
			if derr := b.Delete(ctx, ref); derr != nil && !errors.Is(derr, certs.ErrKeyPairNotFound) {
				b.DeleteLater(ref)
				cause = errors.Join(cause, fmt.Errorf("roll back %s (retried by the next store): %w", ref, derr))
			}
		}
		return cause
	}
	for _, it := range items {
		ref, err := b.Store(ctx, it.name, it.kp, owner)
		if err != nil {
			return certs.Refs{}, false, removeWritten(err)
		}
		written = append(written, ref)
	}
	refs := certs.Refs{CACertRef: written[0], EtcdCACertRef: written[1], FrontProxyCACertRef: written[2], MagnumCertRef: written[3], ClusterUUID: clusterUUID}
	set := db.Fields{}
	for i, col := range refColumns {
		set[col] = written[i]
	}
	_, err = b.st.UpdateCluster(ctx, clusterUUID, set, db.Guard{Unset: refColumns})
	if err == nil {
		return refs, true, nil
	}
	// What the row holds now decides: this attempt's set (an update whose acknowledgement was
	// lost), another attempt's (keep it, drop ours), or neither (the update did not commit: ours
	// are referred to by nothing). When the row cannot be read, ours stay: deleting containers a
	// committed row may refer to would break the cluster for good.
	now, rerr := b.st.GetCluster(ctx, clusterUUID)
	if rerr != nil {
		if errors.Is(rerr, magnum.ErrClusterNotFound) {
			return certs.Refs{}, false, removeWritten(notFound(rerr))
		}
		return certs.Refs{}, false, notFound(err)
	}
	switch current := refsOfRow(now); {
	case current == refs:
		return refs, true, nil
	case complete(current):
		if err := removeWritten(nil); err != nil {
			return certs.Refs{}, false, err
		}
		return current, false, nil
	}
	return certs.Refs{}, false, removeWritten(notFound(err))
}
