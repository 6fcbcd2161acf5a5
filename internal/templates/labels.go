package templates

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LabelType is the type of a label's value; it decides how the value is validated.
type LabelType string

const (
	LabelString LabelType = "string"
	LabelBool   LabelType = "bool"
	LabelInt    LabelType = "int"
	LabelEnum   LabelType = "enum"
	// LabelEnumList is a comma-separated list of values of Enum, in order.
	LabelEnumList LabelType = "enum-list"
	LabelVersion  LabelType = "kubernetes-version"
	LabelDuration LabelType = "duration"
	LabelCIDR     LabelType = "cidr"
	// LabelCIDRList is a comma-separated list of CIDRs.
	LabelCIDRList LabelType = "cidr-list"
	LabelIP       LabelType = "ip"
	LabelHTTPSURL LabelType = "https-url"
	// LabelNameList is a comma-separated list of OpenStack names (availability zones, networks).
	LabelNameList LabelType = "name-list"
	// LabelSANList is a comma-separated list of IP addresses and DNS names.
	LabelSANList LabelType = "san-list"
	// LabelCipherSuites is a comma-separated list of Go/Kubernetes TLS cipher suite names.
	LabelCipherSuites LabelType = "cipher-suite-list"
	// LabelAdmissionPlugins is a comma-separated list of kube-apiserver admission plugin names.
	LabelAdmissionPlugins LabelType = "admission-plugin-list"
	// LabelRegistry is a container registry (host[:port]) with an optional repository path.
	LabelRegistry LabelType = "registry"
	// LabelImageTag is an image tag of a component the anchors deploy.
	LabelImageTag LabelType = "image-tag"
	// LabelFlags is free-form command-line flags of a Kubernetes component.
	LabelFlags LabelType = "flags"
)

// Anchor is a system whose label names the bridge accepts.
type Anchor string

const (
	AnchorHeat     Anchor = "heat"               // Magnum's legacy Heat driver k8s_fedora_coreos_v1
	AnchorVexxhost Anchor = "magnum-cluster-api" // vexxhost/magnum-cluster-api
	AnchorCAPIHelm Anchor = "magnum-capi-helm"   // openstack/magnum-capi-helm
	AnchorBridge   Anchor = "bridge"             // labels only this bridge defines
)

// LabelSpec describes one label: how it is typed and validated, what the anchors meant by it and
// what the bridge does with it. The registry is the single source of docs/labels.md.
type LabelSpec struct {
	Name  string
	Group string
	Type  LabelType
	// Default is the value used when the label is absent: the bridge's when it implements the label,
	// otherwise the anchors' (documentation only).
	Default string
	// Description says what the label means (in the anchors that accept it).
	Description string
	// Effect says what the bridge renders for it; empty for labels it does not implement.
	Effect  string
	Anchors []Anchor
	// Flavors lists the infrastructure flavors that implement the label; empty: not implemented,
	// so a cluster that sets it gets it reported in its status reason.
	Flavors []Flavor
	// NodeGroup: a node group's own value of the label overrides the cluster's for that group.
	NodeGroup bool
	Enum      []string
	Min, Max  *int
	// Addon: the effect is rendered by internal/addons (the workload cluster's add-ons), which tests
	// it, not by this package.
	Addon bool
	// Autoscaler: the effect is rendered by internal/autoscaler (the cluster's cluster-autoscaler),
	// which tests it.
	Autoscaler bool
	// Secret values never appear in errors or logs.
	Secret bool
	// AliasOf names the label this one is another spelling of; the canonical one wins when both are set.
	AliasOf string
	// Honored are values the bridge honours for flavors that do not implement the label, because
	// they ask for what the bridge does anyway (e.g. "false" for an add-on the bridge never installs).
	Honored []string
}

// Implemented reports whether the label has an effect for the flavor.
func (s LabelSpec) Implemented(f Flavor) bool { return containsFlavor(s.Flavors, f) }

var registryIndex = func() map[string]int {
	m := make(map[string]int, len(Registry))
	for i, s := range Registry {
		if _, dup := m[s.Name]; dup {
			panic("templates: label " + s.Name + " registered twice")
		}
		m[s.Name] = i
	}
	return m
}()

// LookupLabel returns the registry entry of a label.
func LookupLabel(name string) (LabelSpec, bool) {
	i, ok := registryIndex[name]
	if !ok {
		return LabelSpec{}, false
	}
	return Registry[i], true
}

func lookupLabel(name string) (LabelSpec, bool) { return LookupLabel(name) }

// LabelError names the label a tenant has to fix.
type LabelError struct {
	Label, Value, Reason string
}

func (e *LabelError) Error() string {
	return fmt.Sprintf("invalid value %q for label %s: %s", e.Value, e.Label, e.Reason)
}

// redactedValue stands in for the value of a secret label in errors.
const redactedValue = "<redacted>"

func labelErr(spec LabelSpec, v, reason string) *LabelError {
	if spec.Secret {
		v = redactedValue
	}
	return &LabelError{Label: spec.Name, Value: v, Reason: reason}
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)$`)

// registryRE: host[:port] followed by optional /path segments, lower case as registries require.
var registryRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*/?$`)

// openstackNameRE: what the bridge accepts as an OpenStack resource name in a label (no commas,
// control characters or leading/trailing blanks).
var openstackNameRE = regexp.MustCompile(`^[^,\s\x00-\x1f]([^,\x00-\x1f]*[^,\s\x00-\x1f])?$`)

var imageTagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// splitList splits a comma-separated label value, trimming blanks and dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func validateValue(spec LabelSpec, v string) error {
	bad := func(reason string) error { return labelErr(spec, v, reason) }
	switch spec.Type {
	case LabelBool:
		if _, err := ParseBool(v); err != nil {
			return bad("want true or false")
		}
	case LabelInt:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		lo := 0
		if spec.Min != nil {
			lo = *spec.Min
		}
		if err != nil {
			return bad(fmt.Sprintf("want a whole number >= %d", lo))
		}
		if n < lo {
			return bad(fmt.Sprintf("must be at least %d", lo))
		}
		if spec.Max != nil && n > *spec.Max {
			return bad(fmt.Sprintf("must be at most %d", *spec.Max))
		}
	case LabelEnum:
		if !containsString(spec.Enum, v) {
			return bad("want one of " + strings.Join(spec.Enum, ", "))
		}
	case LabelEnumList:
		items := splitList(v)
		if len(items) == 0 {
			return bad("want a comma-separated list of " + strings.Join(spec.Enum, ", "))
		}
		for _, item := range items {
			if !containsString(spec.Enum, item) {
				return bad(fmt.Sprintf("%q is not one of %s", item, strings.Join(spec.Enum, ", ")))
			}
		}
	case LabelVersion:
		if !versionRE.MatchString(v) {
			return bad("want a Kubernetes version like v1.36.3")
		}
	case LabelDuration:
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return bad("want a duration like 10s or 5m")
		}
	case LabelCIDR:
		if _, err := parseCIDR(v); err != nil {
			return bad(err.Error())
		}
	case LabelCIDRList:
		items := splitList(v)
		if len(items) == 0 {
			return bad("want a comma-separated list of CIDRs like 192.0.2.0/24")
		}
		for _, c := range items {
			if _, err := parseCIDR(c); err != nil {
				return bad(err.Error())
			}
		}
	case LabelIP:
		if _, err := netip.ParseAddr(v); err != nil {
			return bad("want an IP address")
		}
	case LabelHTTPSURL:
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return bad("want an https:// URL without credentials, query or fragment")
		}
	case LabelNameList:
		items := splitList(v)
		if len(items) == 0 {
			return bad("want a comma-separated list of names")
		}
		for _, n := range items {
			if len(n) > 255 || !openstackNameRE.MatchString(n) {
				return bad(fmt.Sprintf("%q is not a valid name", n))
			}
		}
	case LabelSANList:
		items := splitList(v)
		if len(items) == 0 {
			return bad("want a comma-separated list of IP addresses and DNS names")
		}
		for _, s := range items {
			if _, err := netip.ParseAddr(s); err == nil {
				continue
			}
			name := strings.TrimPrefix(s, "*.")
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return bad(fmt.Sprintf("%q is neither an IP address nor a DNS name", s))
			}
		}
	case LabelCipherSuites:
		items := splitList(v)
		if len(items) == 0 {
			return bad("want a comma-separated list of TLS cipher suites")
		}
		for _, c := range items {
			if !knownCipherSuites[c] {
				return bad(fmt.Sprintf("unknown TLS cipher suite %q (want names like TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", c))
			}
		}
	case LabelAdmissionPlugins:
		for _, p := range splitList(v) {
			if reason, removed := removedAdmissionPlugins[p]; removed {
				return bad(fmt.Sprintf("admission plugin %s %s", p, reason))
			}
			if _, ok := admissionPluginMinMinor[p]; !ok {
				return bad(fmt.Sprintf("unknown admission plugin %q", p))
			}
		}
	case LabelRegistry:
		if len(v) > 255 || !registryRE.MatchString(v) {
			return bad("want a registry like registry.example.com:5000/mirror/")
		}
	case LabelImageTag:
		if !imageTagRE.MatchString(v) {
			return bad("want an image tag like v1.2.3")
		}
	case LabelString, LabelFlags:
		if len(spec.Enum) > 0 && !containsString(spec.Enum, v) {
			return bad("want one of " + strings.Join(spec.Enum, ", "))
		}
		if len(v) > 255 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return bad("want at most 255 characters without control characters")
		}
	}
	return nil
}

// parseCIDR accepts a network in CIDR notation whose address is the network's own (10.0.0.0/24, not
// 10.0.0.1/24): anything else is almost always a typo that would render a surprising network.
func parseCIDR(v string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(v))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR like 192.0.2.0/24", v)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set (did you mean %s?)", v, p.Masked())
	}
	return p, nil
}

var knownCipherSuites = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range tls.CipherSuites() {
		m[c.Name] = true
	}
	for _, c := range tls.InsecureCipherSuites() {
		m[c.Name] = true
	}
	return m
}()

// admissionPluginMinMinor is every admission plugin kube-apiserver knows, with the first Kubernetes
// 1.x minor that has it (0: older than any version the bridge renders). Enabling a plugin the
// cluster's version lacks makes kube-apiserver exit, so Render checks it against the version.
var admissionPluginMinMinor = map[string]int{
	"AlwaysAdmit": 0, "AlwaysDeny": 0, "AlwaysPullImages": 0, "CertificateApproval": 0,
	"CertificateSigning": 0, "CertificateSubjectRestriction": 0, "ClusterTrustBundleAttest": 27,
	"DefaultIngressClass": 0, "DefaultStorageClass": 0, "DefaultTolerationSeconds": 0,
	"DenyServiceExternalIPs": 0, "EventRateLimit": 0, "ExtendedResourceToleration": 0,
	"ImagePolicyWebhook": 0, "LimitPodHardAntiAffinityTopology": 0, "LimitRanger": 0,
	"MutatingAdmissionPolicy": 32, "MutatingAdmissionWebhook": 0, "NamespaceAutoProvision": 0,
	"NamespaceExists": 0, "NamespaceLifecycle": 0, "NodeRestriction": 0,
	"OwnerReferencesPermissionEnforcement": 0, "PersistentVolumeClaimResize": 0, "PodNodeSelector": 0,
	"PodSecurity": 0, "PodTolerationRestriction": 0, "PodTopologyLabels": 33, "Priority": 0,
	"ResourceQuota": 0, "RuntimeClass": 0, "ServiceAccount": 0, "StorageObjectInUseProtection": 0,
	"TaintNodesByCondition": 0, "ValidatingAdmissionPolicy": 0, "ValidatingAdmissionWebhook": 0,
	// Read from kube-apiserver v1.36.3; the bridge has not checked in which minor they appeared.
	"NodeDeclaredFeatureValidator": 36, "PodGroupProtection": 36, "PodGroupWorkloadExists": 36,
	"JobValidation": 36, "PodResizeValidator": 36,
}

// removedAdmissionPlugins are plugins Heat-era templates still name; current kube-apiserver refuses to start with them.
var removedAdmissionPlugins = map[string]string{
	"PodSecurityPolicy":      "was removed in Kubernetes 1.25 (use PodSecurity)",
	"SecurityContextDeny":    "was removed in Kubernetes 1.30",
	"PersistentVolumeLabel":  "was removed in Kubernetes 1.31",
	"DenyEscalatingExec":     "was removed in Kubernetes 1.18",
	"DenyExecOnPrivileged":   "was removed in Kubernetes 1.18",
	"Initializers":           "was removed in Kubernetes 1.14",
	"StorageObjectInUse":     "is not a plugin (did you mean StorageObjectInUseProtection?)",
	"NamespaceExistsAndUsed": "is not a plugin",
}

// ParseBool reads a boolean label value: Magnum's drivers accept these spellings in any case, and
// a value copied from a form often has spaces around it.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", v)
}

// honored reports whether an unimplemented label's value asks for what the bridge does anyway.
func honored(spec LabelSpec, v string) bool {
	for _, h := range spec.Honored {
		if spec.Type == LabelBool {
			hb, _ := ParseBool(h)
			if vb, err := ParseBool(v); err == nil && vb == hb {
				return true
			}
			continue
		}
		if strings.EqualFold(strings.TrimSpace(v), h) {
			return true
		}
	}
	return false
}

// ValidateLabels checks the value of every registered label by its type, whether or not the bridge
// implements it for the flavor (a value that is not a boolean is invalid whatever the flavor does
// with it), and returns, sorted, the names of labels it does not implement (for the status
// reason): unknown labels, valid values of registered ones without an effect for this flavor, and
// values the bridge cannot honour. Empty values count as not set. The first invalid value (in name
// order) is a *LabelError naming it.
func ValidateLabels(flavor Flavor, labels map[string]string) (unimplemented []string, err error) {
	names := make([]string, 0, len(labels))
	for k := range labels {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if strings.TrimSpace(labels[k]) == "" {
			continue // Heat-era templates carry empty labels; an empty value means "not set"
		}
		spec, ok := lookupLabel(k)
		if !ok {
			unimplemented = append(unimplemented, k)
			continue
		}
		if err := validateValue(spec, labels[k]); err != nil {
			return nil, err
		}
		if !spec.Implemented(flavor) && !honored(spec, labels[k]) {
			unimplemented = append(unimplemented, k)
		}
	}
	extra, err := crossValidate(flavor, labels)
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 {
		unimplemented = append(unimplemented, extra...)
		sort.Strings(unimplemented)
	}
	return unimplemented, nil
}

// crossValidate checks rules between labels; it runs after every single value is valid. It
// returns implemented labels whose particular value the bridge cannot honour.
func crossValidate(flavor Flavor, labels map[string]string) (unhonored []string, err error) {
	if lo, hi := labels[LabelMinNodeCount], labels[LabelMaxNodeCount]; lo != "" && hi != "" {
		l, _ := strconv.Atoi(strings.TrimSpace(lo))
		h, _ := strconv.Atoi(strings.TrimSpace(hi))
		if l > h {
			return nil, &LabelError{Label: LabelMaxNodeCount, Value: hi, Reason: "must not be smaller than min_node_count " + lo}
		}
	}
	if flavor != FlavorOpenStack {
		return nil, nil
	}
	// CAPO picks the API load balancer's algorithm itself: SOURCE_IP_PORT for the ovn provider,
	// ROUND_ROBIN otherwise. Another algorithm cannot be honoured, so it is reported, not refused.
	if alg := labels[LabelOctaviaLBAlgorithm]; alg != "" {
		want := "ROUND_ROBIN"
		if labelOr(labels, LabelOctaviaProvider) == "ovn" {
			want = "SOURCE_IP_PORT"
		}
		if alg != want {
			unhonored = append(unhonored, LabelOctaviaLBAlgorithm)
		}
	}
	if v, ok := labels[LabelOIDCIssuerURL]; ok && v != "" && labels[LabelOIDCClientID] == "" {
		return nil, &LabelError{Label: LabelOIDCClientID, Value: "", Reason: "is required when oidc_issuer_url is set"}
	}
	for _, l := range []string{LabelOIDCClientID, LabelOIDCUsernameClaim, LabelOIDCUsernamePrefix, LabelOIDCGroupsClaim, LabelOIDCGroupsPrefix} {
		if v := labels[l]; v != "" && labels[LabelOIDCIssuerURL] == "" {
			return nil, &LabelError{Label: l, Value: v, Reason: "needs oidc_issuer_url"}
		}
	}
	return unhonored, nil
}

func containsFlavor(list []Flavor, f Flavor) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// labelOr returns the label's value, the value of the label it is an alias of, or the registry default.
func labelOr(labels map[string]string, name string) string {
	if v, ok := labels[name]; ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	for _, s := range Registry {
		if s.AliasOf == name {
			if v, ok := labels[s.Name]; ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
	}
	spec, _ := lookupLabel(name)
	return spec.Default
}

// labelSet reports whether the label or one of its aliases is given a non-empty value.
func labelSet(labels map[string]string, name string) bool {
	if strings.TrimSpace(labels[name]) != "" {
		return true
	}
	for _, s := range Registry {
		if s.AliasOf == name && strings.TrimSpace(labels[s.Name]) != "" {
			return true
		}
	}
	return false
}

func labelInt(labels map[string]string, name string) int {
	n, _ := strconv.Atoi(labelOr(labels, name))
	return n
}

var imageVersionRE = regexp.MustCompile(`(?i)kube-?(v\d+\.\d+\.\d+)`)

// KubernetesVersion resolves the cluster's version: the kube_tag label, else a version in the image
// name, else the default. It always carries the leading "v" CAPI wants. Whether the bridge builds
// that version is CheckKubernetesVersion's decision (the image's own version, the supported range).
func KubernetesVersion(labels map[string]string, imageName, def string) (string, error) {
	v := labels[LabelKubeTag]
	if v == "" {
		if m := imageVersionRE.FindStringSubmatch(imageName); m != nil {
			v = m[1]
		}
	}
	if v == "" {
		v = def
	}
	if !versionRE.MatchString(v) {
		return "", &LabelError{Label: LabelKubeTag, Value: v, Reason: "want a Kubernetes version like v1.36.3"}
	}
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v, nil
}
