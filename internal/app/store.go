package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
)

// store adapts Magnum's database (internal/magnum/db) to what the conductor and the certificate
// manager need.
type store struct {
	*db.Store
}

var _ conductor.Store = store{}

func openStore(ctx context.Context, o *Options) (store, error) {
	s, err := db.Open(ctx, o.DatabaseURL)
	if err != nil {
		return store{}, err
	}
	return store{s}, nil
}

// notFound maps the store's Magnum exceptions to the conductor's sentinel.
func notFound(err error) error {
	if errors.Is(err, magnum.ErrClusterNotFound) || errors.Is(err, magnum.ErrNodeGroupNotFound) ||
		errors.Is(err, magnum.ErrObjectNotFound) || errors.Is(err, magnum.ErrX509KeyPairNotFound) {
		return errors.Join(conductor.ErrNotFound, err)
	}
	if errors.Is(err, db.ErrConflict) {
		return errors.Join(conductor.ErrConflict, err)
	}
	var me *magnum.Exception
	if err != nil && !errors.As(err, &me) {
		return errors.Join(conductor.ErrDatabase, err) // the reason a tenant reads names the service
	}
	return err
}

func (s store) CreateCluster(ctx context.Context, c *magnum.Cluster, groups []*magnum.NodeGroup) (bool, error) {
	rows := make([]*db.NodeGroup, len(groups))
	for i, g := range groups {
		rows[i] = db.NodeGroupFromView(g)
	}
	_, created, err := s.Store.CreateCluster(ctx, db.ClusterFromView(c), rows...)
	return created, notFound(err)
}

func (s store) GetCluster(ctx context.Context, uuid string) (*magnum.Cluster, error) {
	row, err := s.Store.GetCluster(ctx, uuid)
	if err != nil {
		return nil, notFound(err)
	}
	return row.View(), nil
}

func (s store) GetClusterTemplate(ctx context.Context, uuid string) (*magnum.ClusterTemplate, error) {
	row, err := s.Store.GetClusterTemplate(ctx, uuid)
	if err != nil {
		if errors.Is(err, magnum.ErrClusterTemplateNotFound) {
			return nil, errors.Join(conductor.ErrNotFound, err)
		}
		return nil, notFound(err)
	}
	return row.View(), nil
}

func (s store) ListNodeGroups(ctx context.Context, clusterUUID string) ([]*magnum.NodeGroup, error) {
	rows, err := s.Store.ListNodeGroups(ctx, clusterUUID)
	if err != nil {
		return nil, notFound(err)
	}
	out := make([]*magnum.NodeGroup, len(rows))
	for i, r := range rows {
		out[i] = r.View()
	}
	return out, nil
}

func (s store) ListClustersByStatus(ctx context.Context, statuses ...magnum.ClusterStatus) ([]*magnum.Cluster, error) {
	rows, err := s.Store.ListClustersByStatus(ctx, statuses...)
	if err != nil {
		return nil, notFound(err)
	}
	out := make([]*magnum.Cluster, len(rows))
	for i, r := range rows {
		out[i] = r.View()
	}
	return out, nil
}

// nullable writes "" as NULL, as Python writes None.
func nullable(s *string) any {
	if *s == "" {
		return nil
	}
	return *s
}

func (s store) UpdateCluster(ctx context.Context, uuid string, u conductor.ClusterUpdate) error {
	set := db.Fields{}
	if u.Status != nil {
		set["status"] = *u.Status
	}
	if u.StatusReason != nil {
		set["status_reason"] = nullable(u.StatusReason)
	}
	if u.StackID != nil {
		set["stack_id"] = *u.StackID
	}
	if u.APIAddress != nil {
		set["api_address"] = *u.APIAddress
	}
	if u.COEVersion != nil {
		set["coe_version"] = *u.COEVersion
	}
	if u.HealthStatus != nil {
		set["health_status"] = *u.HealthStatus
	}
	if u.HealthStatusReason != nil {
		set["health_status_reason"] = magnum.DictFromMap(u.HealthStatusReason)
	}
	if u.TemplateID != nil {
		set["cluster_template_id"] = *u.TemplateID
	}
	if u.Labels != nil {
		set["labels"] = magnum.DictFromMap(u.Labels)
	}
	if r := u.CertRefs; r != nil {
		set["ca_cert_ref"], set["etcd_ca_cert_ref"] = r.CACertRef, r.EtcdCACertRef
		set["front_proxy_ca_cert_ref"], set["magnum_cert_ref"] = r.FrontProxyCACertRef, r.MagnumCertRef
	}
	if len(set) == 0 {
		return nil
	}
	_, err := s.Store.UpdateCluster(ctx, uuid, set, db.IfStatus(u.OnlyIfStatus...))
	return notFound(err)
}

func (s store) UpdateNodeGroup(ctx context.Context, uuid string, u conductor.NodeGroupUpdate) error {
	set := db.Fields{}
	if u.Status != nil {
		set["status"] = *u.Status
	}
	if u.StatusReason != nil {
		set["status_reason"] = nullable(u.StatusReason)
	}
	if u.NodeCount != nil {
		set["node_count"] = *u.NodeCount
	}
	if u.NodeAddresses != nil {
		set["node_addresses"] = u.NodeAddresses
	}
	if u.StackID != nil {
		set["stack_id"] = *u.StackID
	}
	if u.ImageID != nil {
		set["image_id"] = *u.ImageID
	}
	if len(set) == 0 {
		return nil
	}
	_, err := s.Store.UpdateNodeGroup(ctx, u.ClusterUUID, uuid, set, db.IfStatus(u.OnlyIfStatus...))
	return notFound(err)
}

func (s store) CreateNodeGroup(ctx context.Context, ng *magnum.NodeGroup) (bool, error) {
	_, created, err := s.Store.CreateNodeGroup(ctx, db.NodeGroupFromView(ng))
	return created, notFound(err)
}

func (s store) GetNodeGroup(ctx context.Context, clusterUUID, uuid string) (*magnum.NodeGroup, error) {
	row, err := s.Store.GetNodeGroup(ctx, clusterUUID, uuid)
	if err != nil {
		return nil, notFound(err)
	}
	return row.View(), nil
}

func (s store) SaveNodeGroupChanges(ctx context.Context, ng *magnum.NodeGroup, onlyIfStatus ...magnum.ClusterStatus) error {
	set, err := db.ChangedFields(ng)
	if err != nil {
		return err
	}
	_, err = s.Store.UpdateNodeGroup(ctx, ng.ClusterID.Or(""), ng.UUID.Or(""), set, db.IfStatus(onlyIfStatus...))
	return notFound(err)
}

func (s store) DeleteNodeGroup(ctx context.Context, clusterUUID, uuid string) error {
	_, err := s.Store.DeleteNodeGroup(ctx, clusterUUID, uuid)
	return notFound(err)
}

// DeleteCluster removes the cluster row, and its node group rows a little later (db.Store.DeleteCluster).
func (s store) DeleteCluster(ctx context.Context, uuid string) error {
	_, err := s.Store.DeleteCluster(ctx, uuid)
	return notFound(err)
}

// Heartbeat keeps the magnum_service row fresh until ctx ends, while alive reports true (the
// bridge consumes from RabbitMQ); onBeat is told about every beat written or failed.
func (s store) Heartbeat(ctx context.Context, host string, interval time.Duration, alive func() bool, onBeat func(*db.MagnumService, error)) error {
	return (&db.Heartbeat{Store: s.Store, Host: host, Interval: interval, Alive: alive, OnBeat: onBeat}).Run(ctx)
}

// KeyPairs is the x509keypair certificate backend.
func (s store) KeyPairs() certs.Backend { return keyPairs{s.Store} }

type keyPairs struct{ st *db.Store }

var _ certs.ClusterSetStore = keyPairs{}

// x509Row is the x509keypair row of a key pair stored under ref.
func x509Row(ref string, kp certs.KeyPair, owner certs.Owner) *db.X509KeyPair {
	row := &db.X509KeyPair{UUID: ref, Certificate: &kp.Certificate,
		PrivateKey: ptrSecret(kp.PrivateKey), PrivateKeyPassphrase: ptrSecret(kp.Passphrase),
		ProjectID: &owner.ProjectID, UserID: &owner.UserID}
	if kp.Intermediates != "" {
		row.Intermediates = &kp.Intermediates
	}
	return row
}

func (k keyPairs) Store(ctx context.Context, _ string, kp certs.KeyPair, owner certs.Owner) (string, error) {
	saved, _, err := k.st.CreateX509KeyPair(ctx, x509Row(newUUID(), kp, owner))
	if err != nil {
		return "", err
	}
	return saved.UUID, nil
}

// StoreClusterSet implements certs.ClusterSetStore: the four rows, under refs derived from the
// cluster, and the cluster's refs in one transaction (db.Store.StoreClusterKeyPairs).
func (k keyPairs) StoreClusterSet(ctx context.Context, clusterUUID string, pki *certs.ClusterPKI, owner certs.Owner) (certs.Refs, bool, error) {
	refs := certs.ClusterRefs(clusterUUID)
	stored, err := k.st.StoreClusterKeyPairs(ctx, clusterUUID, []db.ClusterKeyPair{
		{RefColumn: "ca_cert_ref", KeyPair: x509Row(refs.CACertRef, pki.KubernetesCA.Stored, owner)},
		{RefColumn: "etcd_ca_cert_ref", KeyPair: x509Row(refs.EtcdCACertRef, pki.EtcdCA.Stored, owner)},
		{RefColumn: "front_proxy_ca_cert_ref", KeyPair: x509Row(refs.FrontProxyCACertRef, pki.FrontProxyCA.Stored, owner)},
		{RefColumn: "magnum_cert_ref", KeyPair: x509Row(refs.MagnumCertRef, pki.MagnumClient.Stored, owner)},
	})
	return refs, stored, notFound(err) // as the conductor's own UpdateCluster reports them
}

func (k keyPairs) Load(ctx context.Context, ref string) (certs.KeyPair, error) {
	row, err := k.st.GetX509KeyPair(ctx, ref)
	if err != nil {
		if errors.Is(err, magnum.ErrX509KeyPairNotFound) {
			return certs.KeyPair{}, errors.Join(certs.ErrKeyPairNotFound, err)
		}
		return certs.KeyPair{}, err
	}
	kp := certs.KeyPair{}
	if row.Certificate != nil {
		kp.Certificate = *row.Certificate
	}
	if row.PrivateKey != nil {
		kp.PrivateKey = row.PrivateKey.Reveal()
	}
	if row.PrivateKeyPassphrase != nil {
		kp.Passphrase = row.PrivateKeyPassphrase.Reveal()
	}
	if row.Intermediates != nil {
		kp.Intermediates = *row.Intermediates
	}
	return kp, nil
}

func (k keyPairs) Delete(ctx context.Context, ref string) error {
	deleted, err := k.st.DeleteX509KeyPair(ctx, ref)
	if err != nil {
		return err
	}
	if !deleted {
		return certs.ErrKeyPairNotFound
	}
	return nil
}

func ptrSecret(s string) *magnum.Secret {
	sec := magnum.Secret(s)
	return &sec
}

func newUUID() string { return uuid.NewString() }
