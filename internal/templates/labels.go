package templates

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LabelType is the type of a label's value.
type LabelType string

const (
	LabelString   LabelType = "string"
	LabelBool     LabelType = "bool"
	LabelInt      LabelType = "int"
	LabelVersion  LabelType = "kubernetes-version"
	LabelDuration LabelType = "duration"
)

// LabelSpec describes one label the bridge understands.
type LabelSpec struct {
	Name        string
	Type        LabelType
	Default     string
	Description string
	// Flavors restricts a label to some infrastructure flavors (empty: all).
	Flavors []Flavor
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)$`)

// Registry is the typed list of labels the bridge implements. A label that is not here is not
// implemented: it is reported back to the tenant, never silently dropped.
var Registry = []LabelSpec{
	{Name: "kube_tag", Type: LabelVersion, Description: "Kubernetes version of the cluster, e.g. v1.36.3. Default: the version in the image name (…-kube-vX.Y.Z), else the bridge's default."},
	{Name: "auto_healing_enabled", Type: LabelBool, Default: "true", Description: "Replace machines whose node stays unhealthy (MachineHealthCheck)."},
	{Name: "auto_scaling_enabled", Type: LabelBool, Default: "false", Description: "Let the cluster autoscaler size worker node groups between min_node_count and max_node_count."},
	{Name: "min_node_count", Type: LabelInt, Default: "0", Description: "Lower bound of the default worker group when autoscaling."},
	{Name: "max_node_count", Type: LabelInt, Description: "Upper bound of the default worker group when autoscaling (default: node_count)."},
	{Name: "inmemory_machine_startup", Type: LabelDuration, Default: "10s", Flavors: []Flavor{FlavorInMemory},
		Description: "In-memory (test) flavor only: how long a fake machine takes to boot. A duration longer than create_timeout makes the create fail on purpose."},
}

func lookupLabel(name string) (LabelSpec, bool) {
	for _, s := range Registry {
		if s.Name == name {
			return s, true
		}
	}
	return LabelSpec{}, false
}

// LabelError names the label a tenant has to fix.
type LabelError struct {
	Label, Value, Reason string
}

func (e *LabelError) Error() string {
	return fmt.Sprintf("invalid value %q for label %s: %s", e.Value, e.Label, e.Reason)
}

func validateValue(spec LabelSpec, v string) error {
	bad := func(reason string) error { return &LabelError{Label: spec.Name, Value: v, Reason: reason} }
	switch spec.Type {
	case LabelBool:
		if _, err := parseBool(v); err != nil {
			return bad("want true or false")
		}
	case LabelInt:
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return bad("want a whole number >= 0")
		}
	case LabelVersion:
		if !versionRE.MatchString(v) {
			return bad("want a Kubernetes version like v1.36.3")
		}
	case LabelDuration:
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return bad("want a duration like 10s or 5m")
		}
	}
	return nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", v)
}

// ValidateLabels checks every label the bridge implements and returns, sorted, the names of labels
// it does not implement (for the status reason). The first invalid value is an error naming it.
func ValidateLabels(flavor Flavor, labels map[string]string) (unimplemented []string, err error) {
	names := make([]string, 0, len(labels))
	for k := range labels {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		spec, ok := lookupLabel(k)
		if !ok || (len(spec.Flavors) > 0 && !containsFlavor(spec.Flavors, flavor)) {
			unimplemented = append(unimplemented, k)
			continue
		}
		if err := validateValue(spec, labels[k]); err != nil {
			return nil, err
		}
	}
	min, max := labels["min_node_count"], labels["max_node_count"]
	if min != "" && max != "" {
		lo, _ := strconv.Atoi(min)
		hi, _ := strconv.Atoi(max)
		if lo > hi {
			return nil, &LabelError{Label: "max_node_count", Value: max, Reason: "must not be smaller than min_node_count " + min}
		}
	}
	return unimplemented, nil
}

func containsFlavor(list []Flavor, f Flavor) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

// labelOr returns the label's value or the registry default.
func labelOr(labels map[string]string, name string) string {
	if v, ok := labels[name]; ok && v != "" {
		return v
	}
	spec, _ := lookupLabel(name)
	return spec.Default
}

func labelBool(labels map[string]string, name string) bool {
	b, _ := parseBool(labelOr(labels, name))
	return b
}

var imageVersionRE = regexp.MustCompile(`(?i)kube-?(v\d+\.\d+\.\d+)`)

// KubernetesVersion resolves the cluster's version: the kube_tag label, else a version in the image
// name, else the default. It always carries the leading "v" CAPI wants.
func KubernetesVersion(labels map[string]string, imageName, def string) (string, error) {
	v := labels["kube_tag"]
	if v == "" {
		if m := imageVersionRE.FindStringSubmatch(imageName); m != nil {
			v = m[1]
		}
	}
	if v == "" {
		v = def
	}
	if !versionRE.MatchString(v) {
		return "", &LabelError{Label: "kube_tag", Value: v, Reason: "want a Kubernetes version like v1.36.3"}
	}
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v, nil
}

// ParseVersion splits vX.Y.Z into numbers.
func ParseVersion(v string) (major, minor, patch int, err error) {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("not a Kubernetes version: %q", v)
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	patch, _ = strconv.Atoi(m[3])
	return major, minor, patch, nil
}
