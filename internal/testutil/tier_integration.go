//go:build integration

package testutil

const integrationTag = true
