package tenantapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

// templatesOf is a project's view of the cluster templates, as the store's lookup answers it.
func templatesOf(byIdent map[string][]Template, err error) Templates {
	return func(_ context.Context, project, ident string) ([]Template, error) {
		if project != "p1" {
			return nil, nil
		}
		return byIdent[ident], err
	}
}

func TestAdmission(t *testing.T) {
	a := &Admission{NamespacePrefix: "magnum-", Flavor: templates.FlavorInMemory, Log: slog.New(slog.DiscardHandler),
		Templates: templatesOf(map[string][]Template{
			"k8s":  {{UUID: "t-1", Labels: map[string]string{"kube_tag": "v1.33.1"}}},
			"dup":  {{UUID: "t-2"}, {UUID: "t-3"}},
			"t-1":  {{UUID: "t-1"}},
			"next": {{UUID: "t-4"}},
		}, nil)}
	cases := []struct {
		name, namespace string
		mutate          func(*v1alpha1.MagnumCluster)
		old             *v1alpha1.MagnumCluster
		wantErr         string
		wantWarnings    int
	}{
		{name: "valid", namespace: "magnum-p1"},
		{name: "valid labels", namespace: "magnum-p1", mutate: func(o *v1alpha1.MagnumCluster) {
			o.Spec.Labels = map[string]string{"kube_tag": "v1.33.1"}
		}},
		{name: "not a project namespace", namespace: "default", wantErr: "metadata.namespace: MagnumClusters live in a project namespace"},
		{name: "unknown template", namespace: "magnum-p1", mutate: func(o *v1alpha1.MagnumCluster) { o.Spec.ClusterTemplate = "nope" },
			wantErr: `spec.clusterTemplate: Not found: "nope": no cluster template of that name or uuid is visible to project p1`},
		{name: "another project's template", namespace: "magnum-p2",
			wantErr: `spec.clusterTemplate: Not found: "k8s"`},
		{name: "ambiguous template", namespace: "magnum-p1", mutate: func(o *v1alpha1.MagnumCluster) { o.Spec.ClusterTemplate = "dup" },
			wantErr: `spec.clusterTemplate: Invalid value: "dup": 2 cluster templates have that name; give the uuid`},
		{name: "unknown label", namespace: "magnum-p1", mutate: func(o *v1alpha1.MagnumCluster) {
			o.Spec.Labels = map[string]string{"not_a_label_xyz": "1"}
		}, wantErr: `spec.labels[not_a_label_xyz]: Unsupported value: "not_a_label_xyz" is not a label magnum-capi-bridge knows`},
		{name: "invalid label value", namespace: "magnum-p1", mutate: func(o *v1alpha1.MagnumCluster) {
			o.Spec.Labels = map[string]string{"auto_healing_enabled": "maybe"}
		}, wantErr: `spec.labels[auto_healing_enabled]: Invalid value: invalid value "maybe" for label auto_healing_enabled`},
		{name: "node group's unknown label", namespace: "magnum-p1", mutate: func(o *v1alpha1.MagnumCluster) {
			o.Spec.NodeGroups = []v1alpha1.NodeGroupSpec{{Name: "gpu", NodeCount: 1, Labels: map[string]string{"bogus": "1"}}}
		}, wantErr: `spec.nodeGroups[name=gpu].labels[bogus]: Unsupported value`},
		{name: "resize of a cluster whose template is gone", namespace: "magnum-p1",
			mutate: func(o *v1alpha1.MagnumCluster) { o.Spec.ClusterTemplate = "deleted"; o.Spec.NodeCount = 3 },
			old:    object(func(o *v1alpha1.MagnumCluster) { o.Spec.ClusterTemplate = "deleted" })},
		{name: "upgrade to an unknown template", namespace: "magnum-p1",
			mutate: func(o *v1alpha1.MagnumCluster) { o.Spec.ClusterTemplate = "gone" }, old: object(),
			wantErr: `spec.clusterTemplate: Not found: "gone"`},
		{name: "upgrade", namespace: "magnum-p1", mutate: func(o *v1alpha1.MagnumCluster) { o.Spec.ClusterTemplate = "next" }, old: object()},
		{name: "labels changed", namespace: "magnum-p1",
			mutate: func(o *v1alpha1.MagnumCluster) { o.Spec.Labels = map[string]string{"kube_tag": "v1.34.0"} }, old: object(),
			wantErr: "spec.labels: Forbidden: labels cannot change after the cluster is created"},
		{name: "node group labels changed", namespace: "magnum-p1",
			mutate: func(o *v1alpha1.MagnumCluster) {
				o.Spec.NodeGroups = []v1alpha1.NodeGroupSpec{{Name: "gpu", NodeCount: 1, Labels: map[string]string{"kube_tag": "v1.34.0"}}}
			},
			old: object(func(o *v1alpha1.MagnumCluster) {
				o.Spec.NodeGroups = []v1alpha1.NodeGroupSpec{{Name: "gpu", NodeCount: 1}}
			}),
			wantErr: "spec.nodeGroups[name=gpu].labels: Forbidden"},
		{name: "metadata only (the bridge's finalizer)", namespace: "magnum-p1",
			mutate: func(o *v1alpha1.MagnumCluster) { o.Spec.Labels = map[string]string{"since_unknown": "1"} },
			old:    object(func(o *v1alpha1.MagnumCluster) { o.Spec.Labels = map[string]string{"since_unknown": "1"} })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := object()
			if tc.mutate != nil {
				tc.mutate(obj)
			}
			old := tc.old
			if old == nil {
				old = &v1alpha1.MagnumCluster{}
			}
			warnings, err := a.Validate(context.Background(), tc.namespace, obj, old)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			}
			assert.Len(t, warnings, tc.wantWarnings)
		})
	}

	down := &Admission{NamespacePrefix: "magnum-", Log: slog.New(slog.DiscardHandler), Templates: templatesOf(nil, errors.New("database down"))}
	_, err := down.Validate(context.Background(), "magnum-p1", object(), &v1alpha1.MagnumCluster{})
	assert.ErrorContains(t, err, "the cluster templates cannot be read now, try again: database down")
}

func TestAdmissionReview(t *testing.T) {
	a := &Admission{NamespacePrefix: "magnum-", Flavor: templates.FlavorInMemory, Log: slog.New(slog.DiscardHandler),
		Templates: templatesOf(map[string][]Template{"k8s": {{UUID: "t-1"}}}, nil)}
	review := func(obj *v1alpha1.MagnumCluster) *admissionv1.AdmissionResponse {
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		body, err := json.Marshal(admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u-1", Namespace: "magnum-p1",
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, AdmissionPath, bytes.NewReader(body)))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		require.NotNil(t, out.Response)
		assert.Equal(t, "u-1", string(out.Response.UID))
		return out.Response
	}
	assert.True(t, review(object()).Allowed)
	refused := review(object(func(o *v1alpha1.MagnumCluster) { o.Spec.ClusterTemplate = "nope" }))
	assert.False(t, refused.Allowed)
	assert.Contains(t, refused.Result.Message, "spec.clusterTemplate")
	assert.Equal(t, int32(http.StatusUnprocessableEntity), refused.Result.Code)

	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, AdmissionPath, bytes.NewReader([]byte("{"))))
	assert.Equal(t, http.StatusBadRequest, rec.Code)
}
