package magnum

import (
	"encoding/json"
	"time"
)

// Typed views of the objects the conductor receives and sends. Field tags:
//
//	ovo:"name"          the field's name in magnum_object.data
//	ovo:"name,notnull"  the Python field is not nullable: null is refused in both directions
//	ovo:"name,since=X"  the field exists from object version X on (older versions never carry it)
//	ovo:"name,until=X"  the field exists up to version X (removed after it)
//
// Field lists: each release's object fields, checked against the 15.0.1 object registry and the
// 23.0.0 captures.

// View is implemented by the typed views (Cluster, ClusterTemplate, NodeGroup, Certificate,
// X509KeyPair, MagnumService).
type View interface {
	ObjectName() string
	base() *viewBase
}

// viewBase carries what a view remembers of the primitive it was decoded from.
type viewBase struct {
	// version is the version received (zero for a view built in Go).
	version Version
	// unknown holds fields this service does not know, to re-emit them unchanged when the view
	// is encoded at the version it was received at.
	unknown *Object
	// order and changeOrder are the received field and changes order, kept so that a decoded view
	// re-encodes in the same order.
	order, changeOrder []string
	// topOrder is the received order of the primitive's own keys (name, namespace, …).
	topOrder []string
	// raw holds each known field's received JSON: a field still holding the received value is
	// re-emitted byte for byte (dict key order included, which a Go map would lose).
	raw map[string]json.RawMessage
}

func (b *viewBase) base() *viewBase { return b }

// ReceivedVersion is the version the view was decoded from (zero when built in Go).
func (b *viewBase) ReceivedVersion() Version { return b.version }

// Cluster is magnum.objects.Cluster: 1.23 (Zed … 22.x) and 1.24 (23.0.0, trusts removed).
type Cluster struct {
	viewBase
	ID                  Opt[int64]            `ovo:"id,notnull"`
	UUID                Opt[string]           `ovo:"uuid"`
	Name                Opt[string]           `ovo:"name"`
	ProjectID           Opt[string]           `ovo:"project_id"`
	UserID              Opt[string]           `ovo:"user_id"`
	ClusterTemplateID   Opt[string]           `ovo:"cluster_template_id"`
	Keypair             Opt[string]           `ovo:"keypair"`
	DockerVolumeSize    Opt[int64]            `ovo:"docker_volume_size"`
	Labels              Opt[Dict]             `ovo:"labels"`
	MasterFlavorID      Opt[string]           `ovo:"master_flavor_id"`
	FlavorID            Opt[string]           `ovo:"flavor_id"`
	StackID             Opt[string]           `ovo:"stack_id"`
	Status              Opt[ClusterStatus]    `ovo:"status"`
	StatusReason        Opt[string]           `ovo:"status_reason"`
	HealthStatus        Opt[HealthStatus]     `ovo:"health_status"`
	HealthStatusReason  Opt[Dict]             `ovo:"health_status_reason"`
	CreateTimeout       Opt[int64]            `ovo:"create_timeout"`
	APIAddress          Opt[string]           `ovo:"api_address"`
	DiscoveryURL        Opt[string]           `ovo:"discovery_url"`
	CACertRef           Opt[string]           `ovo:"ca_cert_ref"`
	MagnumCertRef       Opt[string]           `ovo:"magnum_cert_ref"`
	EtcdCACertRef       Opt[string]           `ovo:"etcd_ca_cert_ref"`
	FrontProxyCACertRef Opt[string]           `ovo:"front_proxy_ca_cert_ref"`
	ClusterTemplate     Opt[*ClusterTemplate] `ovo:"cluster_template,notnull"`
	TrustID             Opt[string]           `ovo:"trust_id,until=1.23"`
	TrusteeUsername     Opt[string]           `ovo:"trustee_username,until=1.23"`
	TrusteePassword     Opt[Secret]           `ovo:"trustee_password,until=1.23"`
	TrusteeUserID       Opt[string]           `ovo:"trustee_user_id,until=1.23"`
	CoeVersion          Opt[string]           `ovo:"coe_version"`
	ContainerVersion    Opt[string]           `ovo:"container_version"`
	FixedNetwork        Opt[string]           `ovo:"fixed_network"`
	FixedSubnet         Opt[string]           `ovo:"fixed_subnet"`
	FloatingIPEnabled   Opt[bool]             `ovo:"floating_ip_enabled,notnull"`
	MasterLBEnabled     Opt[bool]             `ovo:"master_lb_enabled,notnull"`
	CreatedAt           Opt[time.Time]        `ovo:"created_at"`
	UpdatedAt           Opt[time.Time]        `ovo:"updated_at"`
}

// ObjectName implements View.
func (*Cluster) ObjectName() string { return "Cluster" }

// ClusterTemplate is magnum.objects.ClusterTemplate: 1.20 (Zed) and 1.21 (+driver, 18.0.0+).
type ClusterTemplate struct {
	viewBase
	ID                  Opt[int64]       `ovo:"id,notnull"`
	UUID                Opt[string]      `ovo:"uuid"`
	ProjectID           Opt[string]      `ovo:"project_id"`
	UserID              Opt[string]      `ovo:"user_id"`
	Name                Opt[string]      `ovo:"name"`
	ImageID             Opt[string]      `ovo:"image_id"`
	FlavorID            Opt[string]      `ovo:"flavor_id"`
	MasterFlavorID      Opt[string]      `ovo:"master_flavor_id"`
	KeypairID           Opt[string]      `ovo:"keypair_id"`
	DNSNameserver       Opt[string]      `ovo:"dns_nameserver"`
	ExternalNetworkID   Opt[string]      `ovo:"external_network_id"`
	FixedNetwork        Opt[string]      `ovo:"fixed_network"`
	FixedSubnet         Opt[string]      `ovo:"fixed_subnet"`
	NetworkDriver       Opt[string]      `ovo:"network_driver"`
	VolumeDriver        Opt[string]      `ovo:"volume_driver"`
	APIServerPort       Opt[int64]       `ovo:"apiserver_port"`
	DockerVolumeSize    Opt[int64]       `ovo:"docker_volume_size"`
	DockerStorageDriver Opt[string]      `ovo:"docker_storage_driver"`
	ClusterDistro       Opt[string]      `ovo:"cluster_distro"`
	COE                 Opt[ClusterType] `ovo:"coe"`
	HTTPProxy           Opt[string]      `ovo:"http_proxy"`
	HTTPSProxy          Opt[string]      `ovo:"https_proxy"`
	NoProxy             Opt[string]      `ovo:"no_proxy"`
	RegistryEnabled     Opt[bool]        `ovo:"registry_enabled,notnull"`
	Labels              Opt[Dict]        `ovo:"labels"`
	TLSDisabled         Opt[bool]        `ovo:"tls_disabled,notnull"`
	Public              Opt[bool]        `ovo:"public,notnull"`
	ServerType          Opt[string]      `ovo:"server_type"`
	InsecureRegistry    Opt[string]      `ovo:"insecure_registry"`
	MasterLBEnabled     Opt[bool]        `ovo:"master_lb_enabled,notnull"`
	FloatingIPEnabled   Opt[bool]        `ovo:"floating_ip_enabled,notnull"`
	Hidden              Opt[bool]        `ovo:"hidden,notnull"`
	Tags                Opt[string]      `ovo:"tags"`
	Driver              Opt[string]      `ovo:"driver,since=1.21"`
	CreatedAt           Opt[time.Time]   `ovo:"created_at"`
	UpdatedAt           Opt[time.Time]   `ovo:"updated_at"`
}

// ObjectName implements View.
func (*ClusterTemplate) ObjectName() string { return "ClusterTemplate" }

// NodeGroup is magnum.objects.NodeGroup: 1.1 (Zed … 22.x) and 1.2 (+node_labels, node_taints).
// cluster_id holds the cluster's uuid.
type NodeGroup struct {
	viewBase
	ID               Opt[int64]         `ovo:"id,notnull"`
	UUID             Opt[string]        `ovo:"uuid,notnull"`
	Name             Opt[string]        `ovo:"name,notnull"`
	ClusterID        Opt[string]        `ovo:"cluster_id,notnull"`
	ProjectID        Opt[string]        `ovo:"project_id,notnull"`
	DockerVolumeSize Opt[int64]         `ovo:"docker_volume_size"`
	Labels           Opt[Dict]          `ovo:"labels"`
	FlavorID         Opt[string]        `ovo:"flavor_id"`
	ImageID          Opt[string]        `ovo:"image_id"`
	NodeAddresses    Opt[[]string]      `ovo:"node_addresses"`
	NodeCount        Opt[int64]         `ovo:"node_count,notnull"`
	Role             Opt[string]        `ovo:"role,notnull"`
	MaxNodeCount     Opt[int64]         `ovo:"max_node_count"`
	MinNodeCount     Opt[int64]         `ovo:"min_node_count,notnull"`
	IsDefault        Opt[bool]          `ovo:"is_default,notnull"`
	StackID          Opt[string]        `ovo:"stack_id"`
	Status           Opt[ClusterStatus] `ovo:"status"`
	StatusReason     Opt[string]        `ovo:"status_reason"`
	Version          Opt[string]        `ovo:"version"`
	NodeLabels       Opt[Dict]          `ovo:"node_labels,since=1.2"`
	NodeTaints       Opt[[]Dict]        `ovo:"node_taints,since=1.2"`
	CreatedAt        Opt[time.Time]     `ovo:"created_at"`
	UpdatedAt        Opt[time.Time]     `ovo:"updated_at"`
}

// ObjectName implements View.
func (*NodeGroup) ObjectName() string { return "NodeGroup" }

// Certificate is magnum.objects.Certificate 1.2 (not persisted): the CSR to sign or the PEM
// returned by get_ca_certificate / sign_certificate.
type Certificate struct {
	viewBase
	ProjectID   Opt[string]    `ovo:"project_id"`
	UserID      Opt[string]    `ovo:"user_id"`
	ClusterUUID Opt[string]    `ovo:"cluster_uuid"`
	CSR         Opt[string]    `ovo:"csr"`
	PEM         Opt[string]    `ovo:"pem"`
	CACertType  Opt[string]    `ovo:"ca_cert_type"`
	CreatedAt   Opt[time.Time] `ovo:"created_at"`
	UpdatedAt   Opt[time.Time] `ovo:"updated_at"`
}

// ObjectName implements View.
func (*Certificate) ObjectName() string { return "Certificate" }

// X509KeyPair is magnum.objects.X509KeyPair 1.2.
type X509KeyPair struct {
	viewBase
	ID                   Opt[int64]     `ovo:"id,notnull"`
	UUID                 Opt[string]    `ovo:"uuid"`
	Certificate          Opt[string]    `ovo:"certificate"`
	PrivateKey           Opt[Secret]    `ovo:"private_key"`
	Intermediates        Opt[string]    `ovo:"intermediates"`
	PrivateKeyPassphrase Opt[Secret]    `ovo:"private_key_passphrase"`
	ProjectID            Opt[string]    `ovo:"project_id"`
	UserID               Opt[string]    `ovo:"user_id"`
	CreatedAt            Opt[time.Time] `ovo:"created_at"`
	UpdatedAt            Opt[time.Time] `ovo:"updated_at"`
}

// ObjectName implements View.
func (*X509KeyPair) ObjectName() string { return "X509KeyPair" }

// MagnumService is magnum.objects.MagnumService 1.0 (the heartbeat row).
type MagnumService struct {
	viewBase
	ID             Opt[int64]     `ovo:"id,notnull"`
	Host           Opt[string]    `ovo:"host"`
	Binary         Opt[string]    `ovo:"binary"`
	Disabled       Opt[bool]      `ovo:"disabled,notnull"`
	DisabledReason Opt[string]    `ovo:"disabled_reason"`
	LastSeenUp     Opt[time.Time] `ovo:"last_seen_up"`
	ForcedDown     Opt[bool]      `ovo:"forced_down,notnull"`
	ReportCount    Opt[int64]     `ovo:"report_count,notnull"`
	CreatedAt      Opt[time.Time] `ovo:"created_at"`
	UpdatedAt      Opt[time.Time] `ovo:"updated_at"`
}

// ObjectName implements View.
func (*MagnumService) ObjectName() string { return "MagnumService" }
