package db

import (
	"fmt"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// Conversions between the RPC objects (magnum views) and the rows. A view field that is absent
// or null becomes NULL; a row becomes a view with every field set, as Python's
// _from_db_object does (so encoding it at 1.24 drops the trust fields, at 1.1 the node labels).

func optPtr[T any](o magnum.Opt[T]) *T {
	if v, ok := o.Get(); ok {
		return &v
	}
	return nil
}

func ptrOpt[T any](p *T) magnum.Opt[T] {
	if p == nil {
		return magnum.Null[T]()
	}
	return magnum.Value(*p)
}

// dictOf is a view's dict field (key order kept: it is the order Python stores).
func dictOf(o magnum.Opt[magnum.Dict]) magnum.Dict { return o.Or(magnum.Dict{}) }

func dictListOf(o magnum.Opt[[]magnum.Dict]) []magnum.Dict {
	if l := o.Or(nil); l != nil {
		return l
	}
	return []magnum.Dict{}
}

func timeOpt(t time.Time) magnum.Opt[time.Time] {
	if t.IsZero() {
		return magnum.Null[time.Time]()
	}
	return magnum.Value(t)
}

// ClusterFromView builds a row from a Cluster object (e.g. cluster_create's, before the INSERT).
func ClusterFromView(v *magnum.Cluster) *Cluster {
	c := &Cluster{
		ID: v.ID.Or(0), UUID: v.UUID.Or(""), Name: optPtr(v.Name), ProjectID: optPtr(v.ProjectID),
		UserID: optPtr(v.UserID), ClusterTemplateID: optPtr(v.ClusterTemplateID), Keypair: optPtr(v.Keypair),
		DockerVolumeSize: optPtr(v.DockerVolumeSize), Labels: dictOf(v.Labels),
		MasterFlavorID: optPtr(v.MasterFlavorID), FlavorID: optPtr(v.FlavorID), StackID: optPtr(v.StackID),
		Status: v.Status.Or(""), StatusReason: optPtr(v.StatusReason), HealthStatus: v.HealthStatus.Or(""),
		HealthStatusReason: dictOf(v.HealthStatusReason), CreateTimeout: optPtr(v.CreateTimeout),
		APIAddress: optPtr(v.APIAddress), DiscoveryURL: optPtr(v.DiscoveryURL), CACertRef: optPtr(v.CACertRef),
		MagnumCertRef: optPtr(v.MagnumCertRef), EtcdCACertRef: optPtr(v.EtcdCACertRef),
		FrontProxyCACertRef: optPtr(v.FrontProxyCACertRef), TrustID: optPtr(v.TrustID),
		TrusteeUsername: optPtr(v.TrusteeUsername), TrusteeUserID: optPtr(v.TrusteeUserID),
		TrusteePassword: optPtr(v.TrusteePassword), CoeVersion: optPtr(v.CoeVersion),
		ContainerVersion: optPtr(v.ContainerVersion), FixedNetwork: optPtr(v.FixedNetwork),
		FixedSubnet: optPtr(v.FixedSubnet), FloatingIPEnabled: v.FloatingIPEnabled.Or(true),
		MasterLBEnabled: v.MasterLBEnabled.Or(false), CreatedAt: v.CreatedAt.Or(time.Time{}),
		UpdatedAt: optPtr(v.UpdatedAt),
	}
	return c
}

// View is the row as a Cluster object with every field set and no changes.
func (c *Cluster) View() *magnum.Cluster {
	v := &magnum.Cluster{
		ID: magnum.Value(c.ID), UUID: magnum.Value(c.UUID), Name: ptrOpt(c.Name), ProjectID: ptrOpt(c.ProjectID),
		UserID: ptrOpt(c.UserID), ClusterTemplateID: ptrOpt(c.ClusterTemplateID), Keypair: ptrOpt(c.Keypair),
		DockerVolumeSize: ptrOpt(c.DockerVolumeSize), Labels: magnum.Value(c.Labels),
		MasterFlavorID: ptrOpt(c.MasterFlavorID), FlavorID: ptrOpt(c.FlavorID), StackID: ptrOpt(c.StackID),
		StatusReason: ptrOpt(c.StatusReason), HealthStatusReason: magnum.Value(c.HealthStatusReason),
		CreateTimeout: ptrOpt(c.CreateTimeout), APIAddress: ptrOpt(c.APIAddress), DiscoveryURL: ptrOpt(c.DiscoveryURL),
		CACertRef: ptrOpt(c.CACertRef), MagnumCertRef: ptrOpt(c.MagnumCertRef), EtcdCACertRef: ptrOpt(c.EtcdCACertRef),
		FrontProxyCACertRef: ptrOpt(c.FrontProxyCACertRef), TrustID: ptrOpt(c.TrustID),
		TrusteeUsername: ptrOpt(c.TrusteeUsername), TrusteeUserID: ptrOpt(c.TrusteeUserID),
		TrusteePassword: ptrOpt(c.TrusteePassword), CoeVersion: ptrOpt(c.CoeVersion),
		ContainerVersion: ptrOpt(c.ContainerVersion), FixedNetwork: ptrOpt(c.FixedNetwork),
		FixedSubnet: ptrOpt(c.FixedSubnet), FloatingIPEnabled: magnum.Value(c.FloatingIPEnabled),
		MasterLBEnabled: magnum.Value(c.MasterLBEnabled), CreatedAt: timeOpt(c.CreatedAt), UpdatedAt: ptrOpt(c.UpdatedAt),
		Status: magnum.Null[magnum.ClusterStatus](), HealthStatus: magnum.Null[magnum.HealthStatus](),
	}
	if c.Status != "" {
		v.Status = magnum.Value(c.Status)
	}
	if c.HealthStatus != "" {
		v.HealthStatus = magnum.Value(c.HealthStatus)
	}
	magnum.ResetChanges(v)
	return v
}

// NodeGroupFromView builds a row from a NodeGroup object (e.g. nodegroup_create's). Python's
// defaults for unset non-nullable fields apply (node_count 1, min_node_count 0, is_default false).
func NodeGroupFromView(v *magnum.NodeGroup) *NodeGroup {
	n := &NodeGroup{
		ID: v.ID.Or(0), UUID: v.UUID.Or(""), Name: v.Name.Or(""), ClusterID: v.ClusterID.Or(""),
		ProjectID: v.ProjectID.Or(""), DockerVolumeSize: optPtr(v.DockerVolumeSize), Labels: dictOf(v.Labels),
		FlavorID: optPtr(v.FlavorID), ImageID: optPtr(v.ImageID), NodeAddresses: v.NodeAddresses.Or([]string{}),
		NodeCount: Ptr(v.NodeCount.Or(1)), MaxNodeCount: optPtr(v.MaxNodeCount), MinNodeCount: Ptr(v.MinNodeCount.Or(0)),
		Role: optPtr(v.Role), IsDefault: v.IsDefault.Or(false), StackID: optPtr(v.StackID), Status: v.Status.Or(""),
		StatusReason: optPtr(v.StatusReason), Version: optPtr(v.Version), NodeLabels: dictOf(v.NodeLabels),
		NodeTaints: dictListOf(v.NodeTaints), CreatedAt: v.CreatedAt.Or(time.Time{}), UpdatedAt: optPtr(v.UpdatedAt),
	}
	return n
}

// View is the row as a NodeGroup object with every field set and no changes.
func (n *NodeGroup) View() *magnum.NodeGroup {
	v := &magnum.NodeGroup{
		ID: magnum.Value(n.ID), UUID: magnum.Value(n.UUID), Name: magnum.Value(n.Name), ClusterID: magnum.Value(n.ClusterID),
		ProjectID: magnum.Value(n.ProjectID), DockerVolumeSize: ptrOpt(n.DockerVolumeSize), Labels: magnum.Value(n.Labels),
		FlavorID: ptrOpt(n.FlavorID), ImageID: ptrOpt(n.ImageID), NodeAddresses: magnum.Value(n.NodeAddresses),
		NodeCount: magnum.Value(int64(1)), MaxNodeCount: ptrOpt(n.MaxNodeCount), MinNodeCount: magnum.Value(int64(0)),
		Role: magnum.Value(""), IsDefault: magnum.Value(n.IsDefault), StackID: ptrOpt(n.StackID),
		Status: magnum.Null[magnum.ClusterStatus](), StatusReason: ptrOpt(n.StatusReason), Version: ptrOpt(n.Version),
		NodeLabels: magnum.Value(n.NodeLabels), NodeTaints: magnum.Value(n.NodeTaints),
		CreatedAt: timeOpt(n.CreatedAt), UpdatedAt: ptrOpt(n.UpdatedAt),
	}
	if n.NodeCount != nil {
		v.NodeCount = magnum.Value(*n.NodeCount)
	}
	if n.MinNodeCount != nil { // 23.0.0 stores NULL for the default nodegroups; the object says 0
		v.MinNodeCount = magnum.Value(*n.MinNodeCount)
	}
	if n.Role != nil {
		v.Role = magnum.Value(*n.Role)
	}
	if n.Status != "" {
		v.Status = magnum.Value(n.Status)
	}
	magnum.ResetChanges(v)
	return v
}

// nonColumnFields are object fields that are not written by an update.
var nonColumnFields = map[string]bool{"id": true, "uuid": true, "created_at": true, "updated_at": true, "cluster_template": true}

// ChangedFields turns a view's changes into the Fields an update writes: what Python's save()
// persists (obj_get_changes). id, uuid, the timestamps and the nested cluster_template are left
// out; updated_at is set by the update itself.
func ChangedFields(view magnum.View) (Fields, error) {
	var row map[string]any
	switch v := view.(type) {
	case *magnum.Cluster:
		row = ClusterFromView(v).values()
	case *magnum.NodeGroup:
		row = NodeGroupFromView(v).values()
		// NodeGroupFromView applies defaults; a changed field set to null must stay null.
		if v.MinNodeCount.IsNull() {
			row["min_node_count"] = nil
		}
		if v.NodeCount.IsNull() {
			row["node_count"] = nil
		}
	default:
		return nil, fmt.Errorf("changed fields: %s objects are not stored by the bridge", view.ObjectName())
	}
	out := Fields{}
	for _, name := range magnum.Changed(view) {
		if nonColumnFields[name] {
			continue
		}
		val, ok := row[name]
		if !ok {
			return nil, fmt.Errorf("changed fields: %s.%s has no column", view.ObjectName(), name)
		}
		out[name] = val
	}
	return out, nil
}

// View is the row as a ClusterTemplate object with every field set and no changes (driver
// only when the schema has the column).
func (t *ClusterTemplate) View() *magnum.ClusterTemplate {
	v := &magnum.ClusterTemplate{
		ID: magnum.Value(t.ID), UUID: magnum.Value(t.UUID), ProjectID: ptrOpt(t.ProjectID), UserID: ptrOpt(t.UserID),
		Name: ptrOpt(t.Name), ImageID: ptrOpt(t.ImageID), FlavorID: ptrOpt(t.FlavorID), MasterFlavorID: ptrOpt(t.MasterFlavorID),
		KeypairID: ptrOpt(t.KeypairID), DNSNameserver: ptrOpt(t.DNSNameserver), ExternalNetworkID: ptrOpt(t.ExternalNetworkID),
		FixedNetwork: ptrOpt(t.FixedNetwork), FixedSubnet: ptrOpt(t.FixedSubnet), NetworkDriver: ptrOpt(t.NetworkDriver),
		VolumeDriver: ptrOpt(t.VolumeDriver), APIServerPort: ptrOpt(t.APIServerPort), DockerVolumeSize: ptrOpt(t.DockerVolumeSize),
		DockerStorageDriver: ptrOpt(t.DockerStorageDriver), ClusterDistro: ptrOpt(t.ClusterDistro),
		COE: magnum.Null[magnum.ClusterType](), HTTPProxy: ptrOpt(t.HTTPProxy), HTTPSProxy: ptrOpt(t.HTTPSProxy),
		NoProxy: ptrOpt(t.NoProxy), RegistryEnabled: magnum.Value(t.RegistryEnabled), Labels: magnum.Value(t.Labels),
		TLSDisabled: magnum.Value(t.TLSDisabled), Public: magnum.Value(t.Public), ServerType: ptrOpt(t.ServerType),
		InsecureRegistry: ptrOpt(t.InsecureRegistry), MasterLBEnabled: magnum.Value(t.MasterLBEnabled),
		FloatingIPEnabled: magnum.Value(t.FloatingIPEnabled), Hidden: magnum.Value(t.Hidden), Tags: ptrOpt(t.Tags),
		CreatedAt: timeOpt(t.CreatedAt), UpdatedAt: ptrOpt(t.UpdatedAt),
	}
	if t.COE != nil {
		v.COE = magnum.Value(magnum.ClusterType(*t.COE))
	}
	if t.hasDriver {
		v.Driver = ptrOpt(t.Driver)
	}
	magnum.ResetChanges(v)
	return v
}
