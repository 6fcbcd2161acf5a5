package boot

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// CAPI's in-memory API server stores a fixed list of kinds. The add-ons the bridge applies to an
// OpenStack cluster also hold a StorageClass (Cinder CSI) and an APIService (metrics-server), which
// a real API server stores; extraKinds serves those two, cluster-scoped, for create, get, list,
// merge patch, update and delete — what CAPI's ClusterResourceSet controller does with them.
type extraKind struct {
	gvr  schema.GroupVersionResource
	kind string
}

var extraKinds = []extraKind{
	{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass"},
	{schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}, "APIService"},
}

// extraStore holds the extra kinds' objects of each endpoint and resource, by name.
type extraStore struct {
	mu   sync.Mutex
	objs map[extraKey]map[string]map[string]any
	rv   int64
}

type extraKey struct{ endpoint, resource string }

func (s *extraStore) forget(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.objs {
		if k.endpoint == endpoint {
			delete(s.objs, k)
		}
	}
}

// serveExtraKinds answers the discovery documents that must list the extra kinds and the extra
// kinds' own paths; it reports false for every other request, which the in-memory API answers.
func (w *Workloads) serveExtraKinds(rw http.ResponseWriter, r *http.Request, api http.Handler) bool {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && path == "/apis" {
		groups := metav1.APIGroupList{}
		if !inner(r, api, &groups) {
			return false
		}
		for _, k := range extraKinds {
			if !hasGroup(groups, k.gvr.Group) {
				gv := metav1.GroupVersionForDiscovery{GroupVersion: k.gvr.GroupVersion().String(), Version: k.gvr.Version}
				groups.Groups = append(groups.Groups, metav1.APIGroup{Name: k.gvr.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
			}
		}
		writeJSON(rw, http.StatusOK, groups)
		return true
	}
	for _, k := range extraKinds {
		gvPath := "/apis/" + k.gvr.GroupVersion().String()
		if r.Method == http.MethodGet && path == gvPath {
			list := metav1.APIResourceList{GroupVersion: k.gvr.GroupVersion().String()}
			if _, err := w.resourceGroup(r.Host); err == nil {
				inner(r, api, &list) // the in-memory API's resources of the group, if it has any
			}
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: k.gvr.Resource, Kind: k.kind,
				Verbs: metav1.Verbs{"create", "delete", "get", "list", "patch", "update"}})
			writeJSON(rw, http.StatusOK, list)
			return true
		}
		if rest, ok := strings.CutPrefix(path, gvPath+"/"+k.gvr.Resource); ok && (rest == "" || !strings.Contains(rest[1:], "/")) {
			w.serveExtraKind(rw, r, k, strings.TrimPrefix(rest, "/"))
			return true
		}
	}
	return false
}

func (w *Workloads) serveExtraKind(rw http.ResponseWriter, r *http.Request, k extraKind, name string) {
	endpoint, err := w.resourceGroup(r.Host)
	if err != nil {
		writeStatus(rw, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	gr := k.gvr.GroupResource()
	s := &w.extra
	s.mu.Lock()
	defer s.mu.Unlock()
	key := extraKey{endpoint, k.gvr.Resource}
	if s.objs[key] == nil {
		if s.objs == nil {
			s.objs = map[extraKey]map[string]map[string]any{}
		}
		s.objs[key] = map[string]map[string]any{}
	}
	objs := s.objs[key]
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	switch {
	case r.Method == http.MethodGet && name == "":
		if r.URL.Query().Get("watch") == "true" {
			writeStatus(rw, apierrors.NewMethodNotSupported(gr, "watch"))
			return
		}
		names := make([]string, 0, len(objs))
		for n := range objs {
			names = append(names, n)
		}
		sort.Strings(names)
		items := make([]any, 0, len(names))
		for _, n := range names {
			items = append(items, objs[n])
		}
		writeJSON(rw, http.StatusOK, map[string]any{"apiVersion": k.gvr.GroupVersion().String(), "kind": k.kind + "List",
			"metadata": map[string]any{"resourceVersion": strconv.FormatInt(s.rv, 10)}, "items": items})
	case r.Method == http.MethodGet:
		if o, ok := objs[name]; ok {
			writeJSON(rw, http.StatusOK, o)
		} else {
			writeStatus(rw, apierrors.NewNotFound(gr, name))
		}
	case r.Method == http.MethodPost && name == "":
		o, err := decodeObject(r, body)
		if err != nil {
			writeStatus(rw, apierrors.NewBadRequest(err.Error()))
			return
		}
		meta, _ := o["metadata"].(map[string]any)
		n, _ := meta["name"].(string)
		if n == "" {
			writeStatus(rw, apierrors.NewBadRequest("metadata.name is required"))
			return
		}
		if _, ok := objs[n]; ok {
			writeStatus(rw, apierrors.NewAlreadyExists(gr, n))
			return
		}
		meta["uid"] = string(uuid.NewUUID())
		meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		s.store(objs, n, o)
		writeJSON(rw, http.StatusCreated, o)
	case (r.Method == http.MethodPatch || r.Method == http.MethodPut) && name != "":
		cur, ok := objs[name]
		if !ok {
			writeStatus(rw, apierrors.NewNotFound(gr, name))
			return
		}
		if r.Method == http.MethodPatch && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/merge-patch+json") {
			writeStatus(rw, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", gr, name, "only merge patches are served", 0, false))
			return
		}
		if r.Method == http.MethodPatch {
			curJSON, _ := json.Marshal(cur)
			if body, err = jsonpatch.MergePatch(curJSON, body); err != nil {
				writeStatus(rw, apierrors.NewBadRequest(err.Error()))
				return
			}
			r.Header.Set("Content-Type", "application/json")
		}
		o, err := decodeObject(r, body)
		if err != nil {
			writeStatus(rw, apierrors.NewBadRequest(err.Error()))
			return
		}
		meta, _ := o["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			o["metadata"] = meta
		}
		curMeta := cur["metadata"].(map[string]any)
		meta["name"], meta["uid"], meta["creationTimestamp"] = name, curMeta["uid"], curMeta["creationTimestamp"]
		s.store(objs, name, o)
		writeJSON(rw, http.StatusOK, o)
	case r.Method == http.MethodDelete && name != "":
		if _, ok := objs[name]; !ok {
			writeStatus(rw, apierrors.NewNotFound(gr, name))
			return
		}
		delete(objs, name)
		writeJSON(rw, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
	default:
		writeStatus(rw, apierrors.NewMethodNotSupported(gr, r.Method))
	}
}

// store keeps o under name with the next resource version.
func (s *extraStore) store(objs map[string]map[string]any, name string, o map[string]any) {
	s.rv++
	o["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatInt(s.rv, 10)
	objs[name] = o
}

// extraScheme decodes the extra kinds from protobuf, which client-go sends for built-in types.
var extraScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(storagev1.AddToScheme(s))
	utilruntime.Must(apiregistrationv1.AddToScheme(s))
	return s
}()

// decodeObject reads a request's object, JSON or protobuf.
func decodeObject(r *http.Request, body []byte) (map[string]any, error) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), runtime.ContentTypeProtobuf) {
		o := map[string]any{}
		return o, json.Unmarshal(body, &o)
	}
	obj, _, err := serializer.NewCodecFactory(extraScheme).UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return nil, err
	}
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(o, "metadata", "creationTimestamp")
	return o, nil
}

// inner asks the in-memory API for a discovery document, in JSON.
func inner(r *http.Request, api http.Handler, into any) bool {
	req := r.Clone(r.Context())
	req.Header.Set("Accept", "application/json")
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	return rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), into) == nil
}

func hasGroup(l metav1.APIGroupList, name string) bool {
	for _, g := range l.Groups {
		if g.Name == name {
			return true
		}
	}
	return false
}

func writeJSON(rw http.ResponseWriter, code int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(v)
}

func writeStatus(rw http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(rw, int(st.Code), st)
}
