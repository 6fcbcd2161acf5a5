package db

import (
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// Row types mirror the tables. A nullable text or integer column is a pointer (nil = NULL), because
// magnum-api shows null and "" differently. Status and health status use "" for NULL. Booleans
// read a NULL as the default Magnum's objects give it. JSON columns read NULL as empty.

// Cluster is a row of `cluster`.
type Cluster struct {
	ID                  int64
	UUID                string
	Name                *string
	ProjectID           *string
	UserID              *string
	ClusterTemplateID   *string
	Keypair             *string
	DockerVolumeSize    *int64
	Labels              magnum.Dict
	MasterFlavorID      *string
	FlavorID            *string
	StackID             *string
	Status              magnum.ClusterStatus
	StatusReason        *string
	HealthStatus        magnum.HealthStatus
	HealthStatusReason  magnum.Dict
	CreateTimeout       *int64
	APIAddress          *string
	DiscoveryURL        *string
	CACertRef           *string
	MagnumCertRef       *string
	EtcdCACertRef       *string
	FrontProxyCACertRef *string
	// Trust columns exist up to Magnum 22.x only (Schema.TrustColumns).
	TrustID           *string
	TrusteeUsername   *string
	TrusteeUserID     *string
	TrusteePassword   *magnum.Secret
	CoeVersion        *string
	ContainerVersion  *string
	FixedNetwork      *string
	FixedSubnet       *string
	FloatingIPEnabled bool // NULL reads as true, the object's default
	MasterLBEnabled   bool
	CreatedAt         time.Time // zero: NULL (set to now on insert)
	UpdatedAt         *time.Time
}

func (c *Cluster) values() map[string]any {
	return map[string]any{
		"uuid": c.UUID, "name": c.Name, "project_id": c.ProjectID, "user_id": c.UserID,
		"cluster_template_id": c.ClusterTemplateID, "keypair": c.Keypair, "docker_volume_size": c.DockerVolumeSize,
		"labels": c.Labels, "master_flavor_id": c.MasterFlavorID, "flavor_id": c.FlavorID, "stack_id": c.StackID,
		"status": c.Status, "status_reason": c.StatusReason, "health_status": c.HealthStatus,
		"health_status_reason": c.HealthStatusReason, "create_timeout": c.CreateTimeout, "api_address": c.APIAddress,
		"discovery_url": c.DiscoveryURL, "ca_cert_ref": c.CACertRef, "magnum_cert_ref": c.MagnumCertRef,
		"etcd_ca_cert_ref": c.EtcdCACertRef, "front_proxy_ca_cert_ref": c.FrontProxyCACertRef,
		"trust_id": c.TrustID, "trustee_username": c.TrusteeUsername, "trustee_user_id": c.TrusteeUserID,
		"trustee_password": c.TrusteePassword, "coe_version": c.CoeVersion, "container_version": c.ContainerVersion,
		"fixed_network": c.FixedNetwork, "fixed_subnet": c.FixedSubnet, "floating_ip_enabled": c.FloatingIPEnabled,
		"master_lb_enabled": c.MasterLBEnabled, "created_at": c.CreatedAt, "updated_at": c.UpdatedAt,
	}
}

func clusterFrom(r scanned) (*Cluster, error) {
	c := &Cluster{
		UUID: r.strOr("uuid", ""), Name: r.str("name"), ProjectID: r.str("project_id"), UserID: r.str("user_id"),
		ClusterTemplateID: r.str("cluster_template_id"), Keypair: r.str("keypair"),
		DockerVolumeSize: r.int("docker_volume_size"), MasterFlavorID: r.str("master_flavor_id"),
		FlavorID: r.str("flavor_id"), StackID: r.str("stack_id"), Status: magnum.ClusterStatus(r.strOr("status", "")),
		StatusReason: r.str("status_reason"), HealthStatus: magnum.HealthStatus(r.strOr("health_status", "")),
		CreateTimeout: r.int("create_timeout"), APIAddress: r.str("api_address"), DiscoveryURL: r.str("discovery_url"),
		CACertRef: r.str("ca_cert_ref"), MagnumCertRef: r.str("magnum_cert_ref"), EtcdCACertRef: r.str("etcd_ca_cert_ref"),
		FrontProxyCACertRef: r.str("front_proxy_ca_cert_ref"), TrustID: r.str("trust_id"),
		TrusteeUsername: r.str("trustee_username"), TrusteeUserID: r.str("trustee_user_id"),
		CoeVersion: r.str("coe_version"), ContainerVersion: r.str("container_version"),
		FixedNetwork: r.str("fixed_network"), FixedSubnet: r.str("fixed_subnet"),
		FloatingIPEnabled: r.boolOr("floating_ip_enabled", true), MasterLBEnabled: r.boolOr("master_lb_enabled", false),
		UpdatedAt: r.time("updated_at"),
	}
	if id := r.int("id"); id != nil {
		c.ID = *id
	}
	if pw := r.str("trustee_password"); pw != nil {
		s := magnum.Secret(*pw)
		c.TrusteePassword = &s
	}
	if t := r.time("created_at"); t != nil {
		c.CreatedAt = *t
	}
	var err error
	if c.Labels, err = r.dict("labels"); err != nil {
		return nil, err
	}
	if c.HealthStatusReason, err = r.dict("health_status_reason"); err != nil {
		return nil, err
	}
	return c, nil
}

// NodeGroup is a row of `nodegroup`. ClusterID holds the cluster's uuid.
type NodeGroup struct {
	ID               int64
	UUID             string
	Name             string
	ClusterID        string
	ProjectID        string
	DockerVolumeSize *int64
	Labels           magnum.Dict
	FlavorID         *string
	ImageID          *string
	NodeAddresses    []string
	NodeCount        *int64
	MaxNodeCount     *int64
	// MinNodeCount: Zed writes 0 for the default nodegroups, 23.0.0 leaves it NULL (the API shows 0).
	MinNodeCount *int64
	Role         *string
	IsDefault    bool
	StackID      *string
	Status       magnum.ClusterStatus
	StatusReason *string
	Version      *string
	// NodeLabels and NodeTaints exist from Magnum 23.0.0 on (Schema.NodeGroupLabelsTaints).
	NodeLabels magnum.Dict
	NodeTaints []magnum.Dict
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

func (n *NodeGroup) values() map[string]any {
	return map[string]any{
		"uuid": n.UUID, "name": n.Name, "cluster_id": n.ClusterID, "project_id": n.ProjectID,
		"docker_volume_size": n.DockerVolumeSize, "labels": n.Labels, "flavor_id": n.FlavorID, "image_id": n.ImageID,
		"node_addresses": n.NodeAddresses, "node_count": n.NodeCount, "max_node_count": n.MaxNodeCount,
		"min_node_count": n.MinNodeCount, "role": n.Role, "is_default": n.IsDefault, "stack_id": n.StackID,
		"status": n.Status, "status_reason": n.StatusReason, "version": n.Version, "node_labels": n.NodeLabels,
		"node_taints": n.NodeTaints, "created_at": n.CreatedAt, "updated_at": n.UpdatedAt,
	}
}

func nodeGroupFrom(r scanned) (*NodeGroup, error) {
	n := &NodeGroup{
		UUID: r.strOr("uuid", ""), Name: r.strOr("name", ""), ClusterID: r.strOr("cluster_id", ""),
		ProjectID: r.strOr("project_id", ""), DockerVolumeSize: r.int("docker_volume_size"),
		FlavorID: r.str("flavor_id"), ImageID: r.str("image_id"), NodeCount: r.int("node_count"),
		MaxNodeCount: r.int("max_node_count"), MinNodeCount: r.int("min_node_count"), Role: r.str("role"),
		IsDefault: r.boolOr("is_default", false), StackID: r.str("stack_id"),
		Status: magnum.ClusterStatus(r.strOr("status", "")), StatusReason: r.str("status_reason"),
		Version: r.str("version"), UpdatedAt: r.time("updated_at"),
	}
	if id := r.int("id"); id != nil {
		n.ID = *id
	}
	if t := r.time("created_at"); t != nil {
		n.CreatedAt = *t
	}
	var err error
	if n.Labels, err = r.dict("labels"); err != nil {
		return nil, err
	}
	if n.NodeAddresses, err = r.stringList("node_addresses"); err != nil {
		return nil, err
	}
	if n.NodeLabels, err = r.dict("node_labels"); err != nil {
		return nil, err
	}
	if n.NodeTaints, err = r.dictList("node_taints"); err != nil {
		return nil, err
	}
	return n, nil
}

// ClusterTemplate is a row of `cluster_template` (magnum-api owns these; the bridge only reads).
type ClusterTemplate struct {
	ID                  int64
	UUID                string
	Name                *string
	ProjectID           *string
	UserID              *string
	ImageID             *string
	FlavorID            *string
	MasterFlavorID      *string
	KeypairID           *string
	DNSNameserver       *string
	ExternalNetworkID   *string
	FixedNetwork        *string
	FixedSubnet         *string
	NetworkDriver       *string
	VolumeDriver        *string
	APIServerPort       *int64
	DockerVolumeSize    *int64
	DockerStorageDriver *string
	ClusterDistro       *string
	COE                 *string
	HTTPProxy           *string
	HTTPSProxy          *string
	NoProxy             *string
	RegistryEnabled     bool
	Labels              magnum.Dict
	TLSDisabled         bool
	Public              bool
	ServerType          *string
	InsecureRegistry    *string
	MasterLBEnabled     bool
	FloatingIPEnabled   bool
	Hidden              bool
	Tags                *string
	// Driver exists from Magnum 18.0.0 on (Schema.ClusterTemplateDriver).
	Driver    *string
	CreatedAt time.Time
	UpdatedAt *time.Time

	hasDriver bool // the row came from a schema with the driver column
}

func clusterTemplateFrom(r scanned) (*ClusterTemplate, error) {
	t := &ClusterTemplate{
		UUID: r.strOr("uuid", ""), Name: r.str("name"), ProjectID: r.str("project_id"), UserID: r.str("user_id"),
		ImageID: r.str("image_id"), FlavorID: r.str("flavor_id"), MasterFlavorID: r.str("master_flavor_id"),
		KeypairID: r.str("keypair_id"), DNSNameserver: r.str("dns_nameserver"),
		ExternalNetworkID: r.str("external_network_id"), FixedNetwork: r.str("fixed_network"),
		FixedSubnet: r.str("fixed_subnet"), NetworkDriver: r.str("network_driver"), VolumeDriver: r.str("volume_driver"),
		APIServerPort: r.int("apiserver_port"), DockerVolumeSize: r.int("docker_volume_size"),
		DockerStorageDriver: r.str("docker_storage_driver"), ClusterDistro: r.str("cluster_distro"), COE: r.str("coe"),
		HTTPProxy: r.str("http_proxy"), HTTPSProxy: r.str("https_proxy"), NoProxy: r.str("no_proxy"),
		RegistryEnabled: r.boolOr("registry_enabled", false), TLSDisabled: r.boolOr("tls_disabled", false),
		Public: r.boolOr("public", false), ServerType: r.str("server_type"), InsecureRegistry: r.str("insecure_registry"),
		MasterLBEnabled: r.boolOr("master_lb_enabled", false), FloatingIPEnabled: r.boolOr("floating_ip_enabled", true),
		Hidden: r.boolOr("hidden", false), Tags: r.str("tags"), Driver: r.str("driver"), UpdatedAt: r.time("updated_at"),
	}
	if id := r.int("id"); id != nil {
		t.ID = *id
	}
	_, t.hasDriver = r["driver"]
	if ts := r.time("created_at"); ts != nil {
		t.CreatedAt = *ts
	}
	var err error
	if t.Labels, err = r.dict("labels"); err != nil {
		return nil, err
	}
	return t, nil
}

// X509KeyPair is a row of `x509keypair` (the x509keypair cert manager's storage).
type X509KeyPair struct {
	ID                   int64
	UUID                 string
	Certificate          *string
	PrivateKey           *magnum.Secret
	Intermediates        *string
	PrivateKeyPassphrase *magnum.Secret
	ProjectID            *string
	UserID               *string
	CreatedAt            time.Time
	UpdatedAt            *time.Time
}

func (k *X509KeyPair) values() map[string]any {
	return map[string]any{
		"uuid": k.UUID, "certificate": k.Certificate, "private_key": k.PrivateKey, "intermediates": k.Intermediates,
		"private_key_passphrase": k.PrivateKeyPassphrase, "project_id": k.ProjectID, "user_id": k.UserID,
		"created_at": k.CreatedAt, "updated_at": k.UpdatedAt,
	}
}

func x509From(r scanned) *X509KeyPair {
	k := &X509KeyPair{UUID: r.strOr("uuid", ""), Certificate: r.str("certificate"), Intermediates: r.str("intermediates"),
		ProjectID: r.str("project_id"), UserID: r.str("user_id"), UpdatedAt: r.time("updated_at")}
	if id := r.int("id"); id != nil {
		k.ID = *id
	}
	if t := r.time("created_at"); t != nil {
		k.CreatedAt = *t
	}
	if s := r.str("private_key"); s != nil {
		sec := magnum.Secret(*s)
		k.PrivateKey = &sec
	}
	if s := r.str("private_key_passphrase"); s != nil {
		sec := magnum.Secret(*s)
		k.PrivateKeyPassphrase = &sec
	}
	return k
}

// MagnumService is a row of `magnum_service` (what `openstack coe service list` shows).
type MagnumService struct {
	ID             int64
	Host           string
	Binary         string
	ReportCount    int64
	Disabled       bool
	DisabledReason *string
	ForcedDown     bool
	LastSeenUp     *time.Time
	CreatedAt      time.Time
	UpdatedAt      *time.Time
}

func serviceFrom(r scanned) *MagnumService {
	m := &MagnumService{Host: r.strOr("host", ""), Binary: r.strOr("binary", ""), Disabled: r.boolOr("disabled", false),
		DisabledReason: r.str("disabled_reason"), ForcedDown: r.boolOr("forced_down", false),
		LastSeenUp: r.time("last_seen_up"), UpdatedAt: r.time("updated_at")}
	if id := r.int("id"); id != nil {
		m.ID = *id
	}
	if n := r.int("report_count"); n != nil {
		m.ReportCount = *n
	}
	if t := r.time("created_at"); t != nil {
		m.CreatedAt = *t
	}
	return m
}

// Ptr returns a pointer to v, for the nullable fields of the row types.
func Ptr[T any](v T) *T { return &v }
