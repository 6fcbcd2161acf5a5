package conductor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// In-process fakes of the conductor's two ports (Store, Kube) and the certificate backend, with
// fault injection: every method first asks faults whether to fail. They hold state like the real
// ones (rows, applied objects, key pairs) so a test can check consistency after any fault.

// faults fails chosen calls: a rule matches an operation name and fails its next n calls.
type faults struct {
	mu    sync.Mutex
	rules map[string]*faultRule
	calls []string
}

type faultRule struct {
	n   int
	err error
}

func newFaults() *faults { return &faults{rules: map[string]*faultRule{}} }

// failNext makes the next n calls of op fail with err (n < 0: until cleared).
func (f *faults) failNext(op string, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[op] = &faultRule{n: n, err: err}
}

func (f *faults) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = map[string]*faultRule{}
}

func (f *faults) check(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
	r, ok := f.rules[op]
	if !ok || r.n == 0 {
		return nil
	}
	if r.n > 0 {
		r.n--
	}
	return r.err
}

// Transient errors as the real clients return them.
var (
	errDBDown        = errors.Join(ErrDatabase, errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"))
	errAPIServerDown = &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis/cluster.x-k8s.io/v1beta2/namespaces/x/clusters/y",
		Err: errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")}
)

type fakeStore struct {
	mu        sync.Mutex
	f         *faults
	now       func() time.Time
	clusters  map[string]*magnum.Cluster
	groups    map[string]*magnum.NodeGroup
	templates map[string]*magnum.ClusterTemplate
}

func newFakeStore(f *faults, now func() time.Time) *fakeStore {
	return &fakeStore{f: f, now: now, clusters: map[string]*magnum.Cluster{}, groups: map[string]*magnum.NodeGroup{},
		templates: map[string]*magnum.ClusterTemplate{}}
}

func cloneCluster(c *magnum.Cluster) *magnum.Cluster   { x := *c; return &x }
func cloneGroup(g *magnum.NodeGroup) *magnum.NodeGroup { x := *g; return &x }

func (s *fakeStore) CreateCluster(_ context.Context, c *magnum.Cluster, groups []*magnum.NodeGroup) (bool, error) {
	if err := s.f.check("store.CreateCluster"); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clusters[c.UUID.Or("")]; ok {
		return false, nil
	}
	s.clusters[c.UUID.Or("")] = cloneCluster(c)
	for _, g := range groups {
		s.groups[g.UUID.Or("")] = cloneGroup(g)
	}
	return true, nil
}

func (s *fakeStore) GetCluster(_ context.Context, id string) (*magnum.Cluster, error) {
	if err := s.f.check("store.GetCluster"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[id]
	if !ok {
		return nil, errors.Join(ErrNotFound, magnum.ClusterNotFound(id))
	}
	return cloneCluster(c), nil
}

func (s *fakeStore) GetClusterTemplate(_ context.Context, id string) (*magnum.ClusterTemplate, error) {
	if err := s.f.check("store.GetClusterTemplate"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[id]
	if !ok {
		return nil, ErrNotFound
	}
	x := *t
	return &x, nil
}

func (s *fakeStore) ListNodeGroups(_ context.Context, clusterUUID string) ([]*magnum.NodeGroup, error) {
	if err := s.f.check("store.ListNodeGroups"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*magnum.NodeGroup
	for _, g := range s.groups {
		if g.ClusterID.Or("") == clusterUUID {
			out = append(out, cloneGroup(g))
		}
	}
	slices.SortFunc(out, func(a, b *magnum.NodeGroup) int { return cmp.Compare(a.Name.Or(""), b.Name.Or("")) })
	return out, nil
}

func (s *fakeStore) ListClustersByStatus(_ context.Context, statuses ...magnum.ClusterStatus) ([]*magnum.Cluster, error) {
	if err := s.f.check("store.ListClustersByStatus"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*magnum.Cluster
	for _, c := range s.clusters {
		if slices.Contains(statuses, c.Status.Or("")) {
			out = append(out, cloneCluster(c))
		}
	}
	return out, nil
}

func guard(status magnum.ClusterStatus, only []magnum.ClusterStatus) error {
	if len(only) > 0 && !slices.Contains(only, status) {
		return ErrConflict
	}
	return nil
}

func (s *fakeStore) UpdateCluster(_ context.Context, id string, u ClusterUpdate) error {
	if err := s.f.check("store.UpdateCluster"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[id]
	if !ok {
		return ErrNotFound
	}
	if err := guard(c.Status.Or(""), u.OnlyIfStatus); err != nil {
		return err
	}
	c = cloneCluster(c)
	if u.Status != nil {
		c.Status.Set(*u.Status)
	}
	if u.StatusReason != nil {
		c.StatusReason.Set(*u.StatusReason)
	}
	if u.StackID != nil {
		c.StackID.Set(*u.StackID)
	}
	if u.APIAddress != nil {
		c.APIAddress.Set(*u.APIAddress)
	}
	if u.COEVersion != nil {
		c.CoeVersion.Set(*u.COEVersion)
	}
	if u.HealthStatus != nil {
		c.HealthStatus.Set(*u.HealthStatus)
	}
	if u.TemplateID != nil {
		c.ClusterTemplateID.Set(*u.TemplateID)
	}
	if u.Labels != nil {
		c.Labels.Set(magnum.DictFromMap(u.Labels))
	}
	if r := u.CertRefs; r != nil {
		c.CACertRef.Set(r.CACertRef)
		c.EtcdCACertRef.Set(r.EtcdCACertRef)
		c.FrontProxyCACertRef.Set(r.FrontProxyCACertRef)
		c.MagnumCertRef.Set(r.MagnumCertRef)
	}
	c.UpdatedAt.Set(s.now())
	s.clusters[id] = c
	return nil
}

func (s *fakeStore) UpdateNodeGroup(_ context.Context, id string, u NodeGroupUpdate) error {
	if err := s.f.check("store.UpdateNodeGroup"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[id]
	if !ok || g.ClusterID.Or("") != u.ClusterUUID {
		return ErrNotFound
	}
	if err := guard(g.Status.Or(""), u.OnlyIfStatus); err != nil {
		return err
	}
	g = cloneGroup(g)
	if u.Status != nil {
		g.Status.Set(*u.Status)
	}
	if u.StatusReason != nil {
		g.StatusReason.Set(*u.StatusReason)
	}
	if u.NodeCount != nil {
		g.NodeCount.Set(*u.NodeCount)
	}
	if u.NodeAddresses != nil {
		g.NodeAddresses.Set(u.NodeAddresses)
	}
	if u.ImageID != nil {
		g.ImageID.Set(*u.ImageID)
	}
	s.groups[id] = g
	return nil
}

func (s *fakeStore) DeleteCluster(_ context.Context, id string) error {
	if err := s.f.check("store.DeleteCluster"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clusters[id]; !ok {
		return ErrNotFound
	}
	delete(s.clusters, id)
	for k, g := range s.groups {
		if g.ClusterID.Or("") == id {
			delete(s.groups, k)
		}
	}
	return nil
}

func (s *fakeStore) CreateNodeGroup(_ context.Context, ng *magnum.NodeGroup) (bool, error) {
	if err := s.f.check("store.CreateNodeGroup"); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.groups[ng.UUID.Or("")]; ok {
		return false, nil
	}
	s.groups[ng.UUID.Or("")] = cloneGroup(ng)
	return true, nil
}

func (s *fakeStore) GetNodeGroup(_ context.Context, clusterUUID, id string) (*magnum.NodeGroup, error) {
	if err := s.f.check("store.GetNodeGroup"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[id]
	if !ok || g.ClusterID.Or("") != clusterUUID {
		return nil, errors.Join(ErrNotFound, magnum.NodeGroupNotFound(id))
	}
	return cloneGroup(g), nil
}

func (s *fakeStore) SaveNodeGroupChanges(_ context.Context, ng *magnum.NodeGroup, onlyIf ...magnum.ClusterStatus) error {
	if err := s.f.check("store.SaveNodeGroupChanges"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[ng.UUID.Or("")]
	if !ok {
		return ErrNotFound
	}
	if err := guard(g.Status.Or(""), onlyIf); err != nil {
		return err
	}
	x := cloneGroup(ng)
	x.ClusterID = g.ClusterID
	s.groups[ng.UUID.Or("")] = x
	return nil
}

func (s *fakeStore) DeleteNodeGroup(_ context.Context, clusterUUID, id string) error {
	if err := s.f.check("store.DeleteNodeGroup"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.groups, id)
	return nil
}

func (s *fakeStore) cluster(t *testing.T, id string) *magnum.Cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[id]
	require.True(t, ok, "cluster %s has no row", id)
	return cloneCluster(c)
}

func (s *fakeStore) group(t *testing.T, clusterUUID, name string) *magnum.NodeGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		if g.ClusterID.Or("") == clusterUUID && g.Name.Or("") == name {
			return cloneGroup(g)
		}
	}
	t.Fatalf("cluster %s has no node group %s", clusterUUID, name)
	return nil
}

// fakeKube is the management cluster: objects applied (last version wins), secrets, namespaces.
// A deleted CAPI Cluster stays "deleting" until finishDeleting is called, as CAPI's would.
type fakeKube struct {
	mu         sync.Mutex
	f          *faults
	namespaces map[string]bool
	objects    map[string]*unstructured.Unstructured
	secrets    map[string]map[string][]byte
	deleting   map[string]bool
	marked     []string
	applies    int
	// addonSets are the add-on sets applied, by cluster name.
	addonSets map[string]*addons.Set
	// addonPrunes are the prune arguments of each ApplyAddons, by cluster name.
	addonPrunes map[string][]bool
	// cloudFailures is what CloudFailures answers (CAPO's refusals).
	cloudFailures []string
	// machines is what Machines answers.
	machines []capi.Machine
	// live is what Observe answers (the apiserver itself); nil: no Cluster.
	live *capi.Observation
	// autoscalers are the autoscalers applied, by cluster uuid.
	autoscalers map[string]*autoscaler.Objects
}

func newFakeKube(f *faults) *fakeKube {
	return &fakeKube{f: f, namespaces: map[string]bool{}, objects: map[string]*unstructured.Unstructured{},
		secrets: map[string]map[string][]byte{}, deleting: map[string]bool{}, addonSets: map[string]*addons.Set{},
		addonPrunes: map[string][]bool{}, autoscalers: map[string]*autoscaler.Objects{}}
}

func objKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func (k *fakeKube) EnsureProjectNamespace(_ context.Context, name, _ string) error {
	if err := k.f.check("kube.EnsureProjectNamespace"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.namespaces[name] = true
	return nil
}

func (k *fakeKube) Apply(_ context.Context, objs ...*unstructured.Unstructured) error {
	if err := k.f.check("kube.Apply"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, o := range objs {
		if !k.namespaces[o.GetNamespace()] && o.GetNamespace() != "" {
			return fmt.Errorf("namespace %s not found", o.GetNamespace())
		}
		k.objects[objKey(o.GetKind(), o.GetNamespace(), o.GetName())] = o.DeepCopy()
		k.applies++
	}
	return nil
}

// ApplyUnchanged applies everything: the fake remembers nothing between applies.
func (k *fakeKube) ApplyUnchanged(ctx context.Context, objs ...*unstructured.Unstructured) error {
	return k.Apply(ctx, objs...)
}

func (k *fakeKube) ApplyClusterSecrets(_ context.Context, ns, _ string, secrets []certs.CAPISecret) error {
	if err := k.f.check("kube.ApplyClusterSecrets"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range secrets {
		k.secrets[ns+"/"+s.Name] = maps.Clone(s.Data)
	}
	return nil
}

// GetCluster reads back the last Cluster applied, as the apiserver would return it.
func (k *fakeKube) GetCluster(_ context.Context, ns, name string) (*clusterv1.Cluster, bool, error) {
	if err := k.f.check("kube.GetCluster"); err != nil {
		return nil, false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	o, ok := k.objects[objKey("Cluster", ns, name)]
	if !ok {
		return nil, false, nil
	}
	var cl clusterv1.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cl); err != nil {
		return nil, false, err
	}
	return &cl, true, nil
}

// ReadClusterClass returns the applied class of that name and the templates named after it.
func (k *fakeKube) ReadClusterClass(_ context.Context, ns, name string) ([]*unstructured.Unstructured, error) {
	if err := k.f.check("kube.ReadClusterClass"); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	class, ok := k.objects[objKey("ClusterClass", ns, name)]
	if !ok {
		return nil, fmt.Errorf("clusterclasses %q not found", name)
	}
	out := []*unstructured.Unstructured{class.DeepCopy()}
	for _, o := range k.objects {
		if o.GetNamespace() == ns && o.GetKind() != "ClusterClass" && strings.HasPrefix(o.GetName(), name+"-") {
			out = append(out, o.DeepCopy())
		}
	}
	return out, nil
}

func (k *fakeKube) Machines(context.Context, string, string) ([]capi.Machine, error) {
	if err := k.f.check("kube.Machines"); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.machines), nil
}

func (k *fakeKube) DeleteCluster(_ context.Context, ns, name string) (bool, error) {
	if err := k.f.check("kube.DeleteCluster"); err != nil {
		return false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	key := objKey("Cluster", ns, name)
	if _, ok := k.objects[key]; !ok {
		return true, nil
	}
	k.deleting[key] = true
	return false, nil
}

// finishDeleting is CAPI removing a deleted Cluster and everything of it.
func (k *fakeKube) finishDeleting() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.deleting {
		delete(k.objects, key)
		delete(k.deleting, key)
	}
}

func (k *fakeKube) DeleteClusterSecrets(_ context.Context, ns, clusterUUID string) error {
	if err := k.f.check("kube.DeleteClusterSecrets"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.secrets {
		delete(k.secrets, key)
	}
	return nil
}

func (k *fakeKube) Observe(_ context.Context, _, _ string) (capi.Observation, bool, error) {
	if err := k.f.check("kube.Observe"); err != nil {
		return capi.Observation{}, false, err
	}
	if k.live == nil {
		return capi.Observation{}, false, nil
	}
	return *k.live, true, nil
}

func (k *fakeKube) CloudFailures(_ context.Context, _, _ string) ([]string, error) {
	if err := k.f.check("kube.CloudFailures"); err != nil {
		return nil, err
	}
	return k.cloudFailures, nil
}

func (k *fakeKube) ReadSecret(_ context.Context, ns, name string) (map[string][]byte, bool, error) {
	if err := k.f.check("kube.ReadSecret"); err != nil {
		return nil, false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	d, ok := k.secrets[ns+"/"+name]
	return maps.Clone(d), ok, nil
}

func (k *fakeKube) DryRunApply(context.Context, ...*unstructured.Unstructured) error {
	return k.f.check("kube.DryRunApply")
}

func (k *fakeKube) MarkMachinesForDeletion(_ context.Context, _, _, _ string, names []string) ([]string, error) {
	if err := k.f.check("kube.MarkMachinesForDeletion"); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.marked = append(k.marked, names...)
	return nil, nil
}

func (k *fakeKube) ApplyAddons(_ context.Context, clusterName string, set *addons.Set, prune bool) error {
	if err := k.f.check("kube.ApplyAddons"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.namespaces[set.ResourceSet.GetNamespace()] {
		return fmt.Errorf("namespace %s not found", set.ResourceSet.GetNamespace())
	}
	k.addonSets[clusterName] = set
	k.addonPrunes[clusterName] = append(k.addonPrunes[clusterName], prune)
	return nil
}

func (k *fakeKube) ApplyAutoscaler(_ context.Context, o *autoscaler.Objects) error {
	if err := k.f.check("kube.ApplyAutoscaler"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.autoscalers[o.Deployment.Labels[templates.LabelClusterUUID]] = o
	return nil
}

func (k *fakeKube) DeleteAutoscaler(_ context.Context, _, clusterUUID string) error {
	if err := k.f.check("kube.DeleteAutoscaler"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.autoscalers, clusterUUID)
	return nil
}

func (k *fakeKube) DeleteAddons(_ context.Context, ns, clusterUUID string) error {
	if err := k.f.check("kube.DeleteAddons"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, set := range k.addonSets {
		if set.ResourceSet.GetNamespace() == ns && set.ResourceSet.GetLabels()[templates.LabelClusterUUID] == clusterUUID {
			delete(k.addonSets, name)
		}
	}
	return nil
}

func (k *fakeKube) Kick(string, string) {}

// clusters returns the CAPI Clusters applied.
func (k *fakeKube) clusters() []*unstructured.Unstructured {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*unstructured.Unstructured
	for key, o := range k.objects {
		if o.GetKind() == "Cluster" && !k.deleting[key] {
			out = append(out, o)
		}
	}
	return out
}

// workerReplicas reads a MachineDeployment topology's replicas from the applied Cluster.
func (k *fakeKube) workerReplicas(t *testing.T, group string) int64 {
	cls := k.clusters()
	require.Len(t, cls, 1)
	mds, _, _ := unstructured.NestedSlice(cls[0].Object, "spec", "topology", "workers", "machineDeployments")
	for _, m := range mds {
		md := m.(map[string]any)
		if md["name"] == group {
			n, _, _ := unstructured.NestedInt64(md, "replicas")
			return n
		}
	}
	t.Fatalf("no machine deployment %s in %v", group, mds)
	return 0
}

func (k *fakeKube) controlPlaneReplicas(t *testing.T) int64 {
	cls := k.clusters()
	require.Len(t, cls, 1)
	n, _, _ := unstructured.NestedInt64(cls[0].Object, "spec", "topology", "controlPlane", "replicas")
	return n
}

// memKeyPairs is the x509keypair table in memory; StoreClusterSet writes the cluster rows of
// store too, as the real one does in the same transaction.
type memKeyPairs struct {
	mu    sync.Mutex
	f     *faults
	rows  map[string]certs.KeyPair
	store *fakeStore
}

func (m *memKeyPairs) Store(_ context.Context, _ string, kp certs.KeyPair, _ certs.Owner) (string, error) {
	if err := m.f.check("certs.Store"); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ref := uuid.NewString()
	m.rows[ref] = kp
	return ref, nil
}

// StoreClusterSet is one transaction: "certs.StoreClusterSet" failing writes nothing, and
// "certs.StoreClusterSet.commit" failing is a commit whose acknowledgement was lost (all written).
func (m *memKeyPairs) StoreClusterSet(_ context.Context, cluster string, pki *certs.ClusterPKI, _ certs.Owner) (certs.Refs, bool, error) {
	if err := m.f.check("certs.StoreClusterSet"); err != nil {
		return certs.Refs{}, false, err
	}
	refs := certs.ClusterRefs(cluster)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.store.mu.Lock()
	defer m.store.mu.Unlock()
	cl, ok := m.store.clusters[cluster]
	if !ok {
		return certs.Refs{}, false, errors.Join(ErrNotFound, magnum.ClusterNotFound(cluster))
	}
	set := map[string]certs.KeyPair{refs.CACertRef: pki.KubernetesCA.Stored, refs.EtcdCACertRef: pki.EtcdCA.Stored,
		refs.FrontProxyCACertRef: pki.FrontProxyCA.Stored, refs.MagnumCertRef: pki.MagnumClient.Stored}
	present := 0
	for ref := range set {
		if _, ok := m.rows[ref]; ok {
			present++
		}
	}
	stored := present < len(set) // a partial set is replaced
	if stored {
		maps.Copy(m.rows, set)
	}
	cl = cloneCluster(cl)
	cl.CACertRef.Set(refs.CACertRef)
	cl.EtcdCACertRef.Set(refs.EtcdCACertRef)
	cl.FrontProxyCACertRef.Set(refs.FrontProxyCACertRef)
	cl.MagnumCertRef.Set(refs.MagnumCertRef)
	cl.UpdatedAt.Set(m.store.now())
	m.store.clusters[cluster] = cl
	return refs, stored, m.f.check("certs.StoreClusterSet.commit")
}

func (m *memKeyPairs) Load(_ context.Context, ref string) (certs.KeyPair, error) {
	if err := m.f.check("certs.Load"); err != nil {
		return certs.KeyPair{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kp, ok := m.rows[ref]
	if !ok {
		return kp, certs.ErrKeyPairNotFound
	}
	return kp, nil
}

func (m *memKeyPairs) Delete(_ context.Context, ref string) error {
	if err := m.f.check("certs.Delete"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rows[ref]; !ok {
		return certs.ErrKeyPairNotFound
	}
	delete(m.rows, ref)
	return nil
}

func (m *memKeyPairs) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows)
}

// encodeArg encodes a view as magnum-api sends it.
func encodeArg(t *testing.T, v magnum.View) json.RawMessage {
	obj, err := magnum.Encode(v, magnum.NewVersions(nil))
	require.NoError(t, err)
	raw, err := obj.Encode()
	require.NoError(t, err)
	return raw
}

func jsonArg(t *testing.T, v any) json.RawMessage {
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

// request builds an RPC request of the demo project.
func request(method string, args map[string]json.RawMessage) *rpc.Request {
	return &rpc.Request{Method: method, Args: args, Attempt: 1, FirstAttempt: time.Now(),
		Context: &rpc.Context{ProjectID: demoProject, UserID: "demo-user", AuthToken: "token"}}
}

const demoProject = "0f0e0d0c0b0a09080706050403020100"

// claimStore stands in for the Leases holding operation claims (internal/app/claims.go, tested
// against a real apiserver there): one holder per cluster; a claim not renewed for ttl on the
// harness clock is free to take, as a Lease whose replica died.
type claimStore struct {
	mu      sync.Mutex
	now     func() time.Time
	ttl     time.Duration
	holders map[string]claimEntry
}

type claimEntry struct {
	holder  string
	renewed time.Time
}

func newClaimStore(now func() time.Time) *claimStore {
	return &claimStore{now: now, ttl: 20 * time.Second, holders: map[string]claimEntry{}}
}

// replica is one replica's view (its conductor.Claims).
func (s *claimStore) replica(name string) *replicaClaims { return &replicaClaims{s: s, me: name} }

func (s *claimStore) holder(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holders[id].holder
}

func (s *claimStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.holders)
}

type replicaClaims struct {
	s  *claimStore
	me string
}

func (r *replicaClaims) Claim(_ context.Context, id string) (bool, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	now := r.s.now()
	if e, ok := r.s.holders[id]; ok && e.holder != r.me && now.Sub(e.renewed) <= r.s.ttl {
		return false, nil
	}
	r.s.holders[id] = claimEntry{holder: r.me, renewed: now}
	return true, nil
}

func (r *replicaClaims) Release(_ context.Context, id string) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.s.holders[id].holder == r.me {
		delete(r.s.holders, id)
	}
	return nil
}

func (r *replicaClaims) Sweep(_ context.Context, active func(string) bool) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for id, e := range r.s.holders {
		if !active(id) && r.s.now().Sub(e.renewed) > r.s.ttl {
			delete(r.s.holders, id)
		}
	}
	return nil
}

// Adoption's reads and writes: the fake holds no other driver's objects (adoption is tested
// against the real management cluster, test/peer).
func (k *fakeKube) ReadLive(context.Context, string, string) (templates.LiveCluster, bool, error) {
	return templates.LiveCluster{}, false, nil
}

func (k *fakeKube) LabelObjects(context.Context, string, []templates.ObjectLabels) error {
	return errors.New("the fake management cluster holds no other driver's objects")
}

func (k *fakeKube) RetireHelmRelease(context.Context, string, string, string) error { return nil }

func (k *fakeKube) EnsureSecretAccess(context.Context, string) error { return nil }

func (k *fakeKube) DeleteLeftovers(context.Context, string, templates.ClusterAPILeftovers) error {
	return nil
}

func (k *fakeKube) NamespaceManaged(_ context.Context, name string) (bool, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.namespaces[name], k.namespaces[name], nil
}
