package templates

// LabelValue is a label's effective value for other pure packages (internal/addons): the label's
// own value, the value of an alias of it, or the registry's default.
func LabelValue(labels map[string]string, name string) string { return labelOr(labels, name) }

// LabelEnabled is LabelValue read as a boolean; an unparsable value counts as false (ValidateLabels
// refuses it before anything is rendered).
func LabelEnabled(labels map[string]string, name string) bool {
	b, _ := ParseBool(labelOr(labels, name))
	return b
}
