package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The registry is the contract: every entry must be documented, typed consistently, and a default
// the bridge applies must itself be a valid value.
func TestRegistryIsConsistent(t *testing.T) {
	groups := map[string]bool{}
	for _, g := range LabelGroups {
		groups[g] = true
	}
	for _, s := range Registry {
		t.Run(s.Name, func(t *testing.T) {
			require.True(t, groups[s.Group], "group %q is not in LabelGroups", s.Group)
			require.NotEmpty(t, s.Anchors, "which anchors accept it")
			require.NotEmpty(t, s.Description)
			require.NotEmpty(t, s.Type)
			if len(s.Flavors) > 0 {
				require.NotEmpty(t, s.Effect, "an implemented label documents what it renders")
				if len(s.Flavors) == len(allFlavors) {
					require.Empty(t, s.Honored, "Honored is for flavors that do not implement the label")
				}
				if s.Default != "" {
					require.NoError(t, validateValue(s, s.Default), "the default must be valid")
				}
			} else {
				require.Empty(t, s.Effect, "a label without flavors has no effect to document")
				require.False(t, s.NodeGroup, "only implemented labels are read from node groups")
			}
			if len(s.Enum) > 0 {
				require.Contains(t, []LabelType{LabelEnum, LabelEnumList, LabelString}, s.Type)
			}
			if s.Type == LabelEnum || s.Type == LabelEnumList {
				require.NotEmpty(t, s.Enum)
			}
			for _, h := range s.Honored {
				if h != "" {
					require.NoError(t, validateValue(s, h), "honoured value %q must be valid", h)
				}
			}
			if s.AliasOf != "" {
				target, ok := LookupLabel(s.AliasOf)
				require.True(t, ok, "alias target %s", s.AliasOf)
				require.Equal(t, target.Flavors, s.Flavors, "an alias is implemented where its target is")
				require.Equal(t, target.Type, s.Type)
			}
		})
	}
}

// docs/labels.md is generated from the registry; this fails when someone edits one without the other.
func TestLabelsDocIsGenerated(t *testing.T) {
	path := filepath.Join(testutil.RepoRoot(), "docs", "labels.md")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(LabelsMarkdown()), 0o644))
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err, "run: go generate ./internal/templates")
	require.Equal(t, LabelsMarkdown(), string(committed), "docs/labels.md is stale: run go generate ./internal/templates")
}

func TestEmptyLabelValuesCountAsUnset(t *testing.T) {
	unimpl, err := ValidateLabels(FlavorOpenStack, map[string]string{"boot_volume_size": "", "cern_enabled": " ", "kube_tag": ""})
	require.NoError(t, err)
	require.Empty(t, unimpl)
}

func TestHonoredValuesAreNotReported(t *testing.T) {
	unimpl, err := ValidateLabels(FlavorOpenStack, map[string]string{
		"monitoring_enabled": "False", "kube_dashboard_enabled": "false", "ingress_controller": "",
		"cgroup_driver": "systemd", "octavia_lb_healthcheck": "true",
	})
	require.NoError(t, err)
	require.Empty(t, unimpl)
	unimpl, err = ValidateLabels(FlavorOpenStack, map[string]string{
		"monitoring_enabled": "true", "kube_dashboard_enabled": "true", "ingress_controller": "nginx",
		"cgroup_driver": "cgroupfs", "octavia_lb_healthcheck": "false", "grafana_admin_passwd": "s3cret",
	})
	require.NoError(t, err)
	require.Equal(t, []string{"cgroup_driver", "grafana_admin_passwd", "ingress_controller", "kube_dashboard_enabled",
		"monitoring_enabled", "octavia_lb_healthcheck"}, unimpl)
}

// Labels implemented only for OpenStack are reported for the in-memory flavor, and validated by
// their type on both: an invalid value is invalid whatever the flavor does with it.
func TestFlavorSpecificLabels(t *testing.T) {
	unimpl, err := ValidateLabels(FlavorInMemory, map[string]string{"boot_volume_size": "20", "kube_tag": "v1.36.3"})
	require.NoError(t, err)
	require.Equal(t, []string{"boot_volume_size"}, unimpl)
	for _, flavor := range []Flavor{FlavorInMemory, FlavorOpenStack} {
		_, err = ValidateLabels(flavor, map[string]string{"boot_volume_size": "not-a-number"})
		require.ErrorContains(t, err, "boot_volume_size", flavor)
	}
	unimpl, err = ValidateLabels(FlavorOpenStack, map[string]string{"inmemory_machine_startup": "1s"})
	require.NoError(t, err)
	require.Equal(t, []string{"inmemory_machine_startup"}, unimpl)
}

// Horizon's Create Cluster dialog sends availability_zone (picked from Nova's zones, "nova" on a
// cloud without zones of its own), auto_scaling_enabled and auto_healing_enabled with every create:
// none of it may put a "not implemented" note in the status reason of a Horizon-made cluster.
func TestHorizonCreateLabelsAreNotReported(t *testing.T) {
	for _, flavor := range []Flavor{FlavorInMemory, FlavorOpenStack} {
		for _, labels := range []map[string]string{
			{"availability_zone": "nova", "auto_scaling_enabled": "False", "auto_healing_enabled": "True"},
			{"availability_zone": "nova", "auto_scaling_enabled": "true", "auto_healing_enabled": "false", "min_node_count": "1", "max_node_count": "3"},
		} {
			unimpl, err := ValidateLabels(flavor, labels)
			require.NoError(t, err)
			require.Empty(t, unimpl, "%s: %v", flavor, labels)
		}
	}
	// A zone the in-memory backend cannot place anything in is still reported there.
	unimpl, err := ValidateLabels(FlavorInMemory, map[string]string{"availability_zone": "az-2"})
	require.NoError(t, err)
	require.Equal(t, []string{"availability_zone"}, unimpl)
	unimpl, err = ValidateLabels(FlavorOpenStack, map[string]string{"availability_zone": "az-2"})
	require.NoError(t, err)
	require.Empty(t, unimpl, "CAPO places machines in any zone")
}

func TestSecretLabelValuesAreRedacted(t *testing.T) {
	spec := LabelSpec{Name: "x", Type: LabelInt, Secret: true}
	err := validateValue(spec, "hunter2")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
	require.Contains(t, err.Error(), redactedValue)
}
