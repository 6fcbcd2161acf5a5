package tenantapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

// AdmissionPath is where the bridge's webhook listener validates MagnumClusters.
const AdmissionPath = "/validate/magnumclusters"

// Template is what admission needs of a cluster template.
type Template struct {
	UUID   string
	Labels map[string]string
}

// Templates finds the cluster templates a project may use by name or uuid (its own and the
// public ones).
type Templates func(ctx context.Context, projectID, ident string) ([]Template, error)

// Admission validates MagnumClusters beyond what their schema can: the template exists for the
// project, and the labels are ones the bridge knows with valid values. Refusals name the field.
type Admission struct {
	Templates       Templates
	NamespacePrefix string
	// Flavor is the bridge's default infrastructure flavor ([bridge] flavor), which a template's
	// labels may override, for the labels' validation.
	Flavor templates.Flavor
	Log    *slog.Logger
}

// ServeHTTP answers an AdmissionReview (admission.k8s.io/v1).
func (a *Admission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		http.Error(w, "want an admission.k8s.io/v1 AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	var obj, old v1alpha1.MagnumCluster
	if err := json.Unmarshal(review.Request.Object.Raw, &obj); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusBadRequest, Message: "the object does not parse as a MagnumCluster: " + err.Error()}
	} else {
		if len(review.Request.OldObject.Raw) > 0 {
			_ = json.Unmarshal(review.Request.OldObject.Raw, &old)
		}
		warnings, err := a.Validate(r.Context(), review.Request.Namespace, &obj, &old)
		resp.Warnings = warnings
		if err != nil {
			resp.Allowed = false
			code := int32(http.StatusUnprocessableEntity)
			var unavailable *unavailableError
			if errors.As(err, &unavailable) {
				code = http.StatusServiceUnavailable
				a.Log.Warn("MagnumCluster admission: cannot read the cluster templates", "error", err)
			}
			resp.Result = &metav1.Status{Code: code, Message: err.Error(), Reason: metav1.StatusReasonInvalid}
		}
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string {
	return "the cluster templates cannot be read now, try again: " + e.err.Error()
}

// Validate checks an object being created or updated (old is the zero object on a create). It
// returns warnings (labels the bridge knows but does not implement) and the first refusal.
func (a *Admission) Validate(ctx context.Context, namespace string, obj, old *v1alpha1.MagnumCluster) ([]string, error) {
	project, ok := strings.CutPrefix(namespace, a.NamespacePrefix)
	if !ok || project == "" {
		return nil, fmt.Errorf("metadata.namespace: MagnumClusters live in a project namespace (%s<project id>), not in %s", a.NamespacePrefix, namespace)
	}
	if obj.DeletionTimestamp != nil || (old.Name != "" && equality.Semantic.DeepEqual(old.Spec, obj.Spec)) {
		return nil, nil // the bridge's finalizer, metadata, an object on its way out: no spec to check
	}
	if err := immutableLabels(obj, old); err != nil {
		return nil, err
	}
	// On a create or a template change the template must resolve; otherwise its labels only refine
	// the check (a template deleted since is no reason to refuse a resize).
	changed := old.Spec.ClusterTemplate != obj.Spec.ClusterTemplate
	var tmpl Template
	found, err := a.Templates(ctx, project, obj.Spec.ClusterTemplate)
	switch {
	case err != nil && changed:
		return nil, &unavailableError{err}
	case err != nil:
	case len(found) == 1:
		tmpl = found[0]
	case len(found) == 0 && changed:
		return nil, fmt.Errorf("spec.clusterTemplate: Not found: %q: no cluster template of that name or uuid is visible to project %s (openstack coe cluster template list)",
			obj.Spec.ClusterTemplate, project)
	case len(found) > 1 && changed:
		return nil, fmt.Errorf("spec.clusterTemplate: Invalid value: %q: %d cluster templates have that name; give the uuid", obj.Spec.ClusterTemplate, len(found))
	}
	labels := obj.Spec.Labels
	if obj.Spec.MergeLabels || len(labels) == 0 {
		labels = merged(tmpl.Labels, obj.Spec.Labels)
	}
	flavor := templates.SelectedFlavor(labels, a.Flavor)
	warnings, err := checkLabels("spec.labels", flavor, obj.Spec.Labels, labels)
	if err != nil {
		return nil, err
	}
	for _, g := range obj.Spec.NodeGroups {
		w, err := checkLabels("spec.nodeGroups[name="+g.Name+"].labels", flavor, g.Labels, merged(labels, g.Labels))
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	return warnings, nil
}

// immutableLabels refuses a change of the labels of the cluster or of a node group it had: Magnum
// keeps both as created.
func immutableLabels(obj, old *v1alpha1.MagnumCluster) error {
	if old.Name == "" {
		return nil
	}
	if !maps.Equal(old.Spec.Labels, obj.Spec.Labels) {
		return errors.New("spec.labels: Forbidden: labels cannot change after the cluster is created (Magnum keeps a cluster's labels)")
	}
	for _, g := range obj.Spec.NodeGroups {
		for _, was := range old.Spec.NodeGroups {
			if was.Name == g.Name && !maps.Equal(was.Labels, g.Labels) {
				return fmt.Errorf("spec.nodeGroups[name=%s].labels: Forbidden: a node group's labels cannot change after it is created", g.Name)
			}
		}
	}
	return nil
}

// checkLabels refuses a label of own (the object's) the bridge does not know, and an invalid value
// in the effective set; labels known but without effect are warnings.
func checkLabels(field string, flavor templates.Flavor, own, effective map[string]string) ([]string, error) {
	names := make([]string, 0, len(own))
	for k := range own {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := templates.LookupLabel(k); !ok {
			return nil, fmt.Errorf("%s[%s]: Unsupported value: %q is not a label magnum-capi-bridge knows (docs/labels.md lists them)", field, k, k)
		}
	}
	unimplemented, err := templates.ValidateLabels(flavor, effective)
	if err != nil {
		var le *templates.LabelError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("%s[%s]: Invalid value: %s", field, le.Label, err)
		}
		return nil, fmt.Errorf("%s: Invalid value: %s", field, err)
	}
	var warnings []string
	for _, k := range unimplemented {
		if _, mine := own[k]; mine {
			warnings = append(warnings, fmt.Sprintf("%s[%s]: the bridge accepts this label but does not act on it for flavor %s", field, k, flavor))
		}
	}
	return warnings, nil
}

func merged(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
